/*
Copyright The multiproject-controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package providerconfig

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func (f *fixture) createSecret(ref mpv1alpha1.SecretReference) {
	f.t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}, Data: map[string][]byte{"key.json": []byte("{}")}}
	if _, err := f.kube.CoreV1().Secrets(ref.Namespace).Create(f.ctx, secret, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// protects reports whether the Secret carries the tenant's in-use finalizer.
func (f *fixture) protects(tenantName string, ref mpv1alpha1.SecretReference) bool {
	secret, err := f.kube.CoreV1().Secrets(ref.Namespace).Get(f.ctx, ref.Name, metav1.GetOptions{})
	return err == nil && slices.Contains(secret.Finalizers, SecretInUseFinalizer(tenantName))
}

// TestCredentialsSecretIsProtectedUntilTheCleanupIsDone: the Secret a tenant's controller and its cleanup read
// carries the tenant's in-use finalizer, listed in status.secretsInUse, from before the controller starts until the
// deletion's cleanup has finished, and it is released before the tenant's own finalizer goes.
func TestCredentialsSecretIsProtectedUntilTheCleanupIsDone(t *testing.T) {
	f := newFixtureWith(t, fixtureConfig{workers: 1, secrets: true})
	f.createSecret(probeSecret("c-1"))
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the Secret to be protected", func() bool { return f.protects("a", probeSecret("c-1")) })
	if got := f.get("a").Status.SecretsInUse; !slices.Equal(got, []mpv1alpha1.SecretReference{probeSecret("c-1")}) {
		t.Fatalf("status.secretsInUse = %v, want the probe's Secret", got)
	}

	f.probes.setPending("a", "2 NEGs not deleted yet")
	f.markDeleted("a")
	f.waitFor("the cleanup", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.cleanup
	})
	f.waitFor("Ready=False Deleting", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionFalse, ReasonDeleting))
	if !f.protects("a", probeSecret("c-1")) {
		t.Fatal("the Secret was released while the cleanup still needs it")
	}

	f.probes.setPending("a", "")
	f.waitFor("the tenant's finalizer to go", func() bool {
		return !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
	if f.protects("a", probeSecret("c-1")) {
		t.Error("the Secret still carries the finalizer of a tenant that finished its cleanup")
	}
}

// TestChangedSecretRefReleasesTheOldSecret: a spec that names another Secret protects the new one and releases the
// old; a ProviderConfig that vanishes (its finalizer stripped by hand) releases its Secret too.
func TestChangedSecretRefReleasesTheOldSecret(t *testing.T) {
	f := newFixtureWith(t, fixtureConfig{workers: 1, secrets: true})
	for _, id := range []string{"c-1", "c-2"} {
		f.createSecret(probeSecret(id))
	}
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the Secret to be protected", func() bool { return f.protects("a", probeSecret("c-1")) })

	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher.ClusterID = "c-2" })
	f.waitFor("the new Secret to be protected and the old one released", func() bool {
		return f.protects("a", probeSecret("c-2")) && !f.protects("a", probeSecret("c-1"))
	})
	f.waitFor("status.secretsInUse to list only the new Secret", func() bool {
		return slices.Equal(f.get("a").Status.SecretsInUse, []mpv1alpha1.SecretReference{probeSecret("c-2")})
	})

	if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(f.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the vanished tenant's Secret to be released", func() bool { return !f.protects("a", probeSecret("c-2")) })
}

// A ProviderConfig's name may have 253 characters; its in-use finalizer must still be a valid one, and two long names
// that share their first 63 characters must not share it.
func TestSecretInUseFinalizerIsValidForEveryTenantName(t *testing.T) {
	long := strings.Repeat("t", 60) + ".example."
	names := []string{"tenant-a", "a", strings.Repeat("n", 63), long + "one", long + "two", strings.Repeat("x.", 126) + "x"}
	seen := map[string]string{}
	for _, name := range names {
		f := SecretInUseFinalizer(name)
		if msgs := validation.IsQualifiedName(f); len(msgs) > 0 {
			t.Errorf("the finalizer of tenant %q, %q, is not a qualified name: %v", name, f, msgs)
		}
		if other, dup := seen[f]; dup {
			t.Errorf("tenants %q and %q share the finalizer %q", other, name, f)
		}
		seen[f] = name
	}
	if got := SecretInUseFinalizer("tenant-a"); got != "in-use.multiproject.io/tenant-a" {
		t.Errorf("a short name's finalizer = %q, want the prefix and the name", got)
	}
}
