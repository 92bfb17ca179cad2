//go:build integration

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
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// credentialsNamespace is where the manifests let the manager read (and protect) tenants' keys.
const credentialsNamespace = "multiproject-gcp-credentials"

// cleanups is the state of the cleaning probes: what each tenant's cleanup still has to remove, what it could read
// of its credentials, and how often it was abandoned.
type cleanups struct {
	mu        sync.Mutex
	pending   map[string]string // controller/tenant → what is left
	readErr   map[string]error  // tenant → the cleanup's last read of its Secret
	reads     map[string]int    // tenant → reads of its Secret by its cleanup
	abandoned map[string]int    // controller/tenant → Abandon calls
}

func newCleanups() *cleanups {
	return &cleanups{pending: map[string]string{}, readErr: map[string]error{}, reads: map[string]int{}, abandoned: map[string]int{}}
}

func (c *cleanups) set(controller, tenantName, left string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[controller+"/"+tenantName] = left
}

func (c *cleanups) abandons(controller, tenantName string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned[controller+"/"+tenantName]
}

// idle is a controller, or cleanup, that does nothing until it is stopped.
type idle struct{}

func (idle) Run(ctx context.Context) { <-ctx.Done() }

// cloudProbe stands in for neg: configured by spec.rancher, it makes "cloud resources" (Abandon gives them up) and
// its cleanup reads the tenant's key, the Secret key-<clusterID> in the credentials namespace, as neg's pusher does.
func (c *cleanups) cloudProbe() *registry.Descriptor {
	rancher := func(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.RancherConfig { return &spec.Rancher }
	return &registry.Descriptor{Name: "cloud", DefaultConcurrentSyncs: 1, Factory: tenant.Factory{
		ConditionType: mpv1alpha1.ProviderConfigConditionNamespaceProjectReady,
		Section:       tenant.SectionOf(rancher),
		CopySection:   tenant.CopySectionOf(rancher),
		New: func(_ context.Context, tc *tenant.Context) (tenant.Controller, error) {
			tc.Condition.Report(metav1.ConditionTrue, "Running", "probe running")
			return idle{}, nil
		},
		Cleanup: func(context.Context, *tenant.Context) (tenant.Controller, error) { return idle{}, nil },
		Pending: func(ctx context.Context, tc *tenant.Context) (string, error) {
			name := tc.Name()
			_, err := tc.KubeClient.CoreV1().Secrets(credentialsNamespace).Get(ctx, "key-"+tc.ProviderConfig.Spec.Rancher.ClusterID, metav1.GetOptions{})
			c.mu.Lock()
			defer c.mu.Unlock()
			c.readErr[name] = err
			c.reads[name]++
			return c.pending["cloud/"+name], nil
		},
		Abandon: func(_ context.Context, tc *tenant.Context) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.abandoned["cloud/"+tc.Name()]++
			return "1 NEG left in GCE", nil
		},
		Secrets: func(spec *mpv1alpha1.ProviderConfigSpec) []mpv1alpha1.SecretReference {
			if spec.Rancher == nil {
				return nil
			}
			return []mpv1alpha1.SecretReference{{Namespace: credentialsNamespace, Name: "key-" + spec.Rancher.ClusterID}}
		},
	}}
}

// clusterProbe stands in for ingress-tunnel: configured by spec.pangolin, its cleanup removes objects in the
// cluster, so it has no Abandon.
func (c *cleanups) clusterProbe() *registry.Descriptor {
	pangolin := func(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.PangolinConfig { return &spec.Pangolin }
	return &registry.Descriptor{Name: "incluster", DefaultConcurrentSyncs: 1, Factory: tenant.Factory{
		ConditionType: mpv1alpha1.ProviderConfigConditionIngressTunnelReady,
		Section:       tenant.SectionOf(pangolin),
		CopySection:   tenant.CopySectionOf(pangolin),
		New: func(_ context.Context, tc *tenant.Context) (tenant.Controller, error) {
			tc.Condition.Report(metav1.ConditionTrue, "Running", "probe running")
			return idle{}, nil
		},
		Cleanup: func(context.Context, *tenant.Context) (tenant.Controller, error) { return idle{}, nil },
		Pending: func(_ context.Context, tc *tenant.Context) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.pending["incluster/"+tc.Name()], nil
		},
	}}
}

func (e *env) deletingWith(name, contains string) func() bool {
	return func() bool {
		pc, err := e.providerConfig(name)
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady)
		return pc.DeletionTimestamp != nil && c != nil && c.Reason == providerconfig.ReasonDeleting && strings.Contains(c.Message, contains)
	}
}

func (e *env) annotateAbandon(name string, set bool) {
	e.t.Helper()
	var value any
	if set {
		value = "true"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{mpv1alpha1.AbandonCloudResourcesAnnotation: value}}})
	if _, err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestSecretDeletedWithItsTenantStaysUntilTheCleanupIsDone: a tenant and its credentials Secret deleted together
// (one Helm release): the Secret carries the tenant's in-use finalizer, so the cleanup still reads it, and both go
// once the cleanup has finished. The manager runs as the manifests' ServiceAccount, so this also pins its RBAC.
func TestSecretDeletedWithItsTenantStaysUntilTheCleanupIsDone(t *testing.T) {
	e := newEnv(t)
	c := newCleanups()
	secrets := e.kube.CoreV1().Secrets(credentialsNamespace)
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key-c-sec"}, Data: map[string][]byte{"key.json": []byte("{}")}}
	if _, err := secrets.Create(e.ctx, key, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = secrets.Patch(context.Background(), key.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = secrets.Delete(context.Background(), key.Name, metav1.DeleteOptions{})
	})
	e.startManagerWith(c.cloudProbe())
	e.createProviderConfig("sec", "c-sec")
	e.waitFor("Ready", e.ready("sec"))
	finalizer := providerconfig.SecretInUseFinalizer("sec")
	e.waitFor("the Secret to carry the in-use finalizer", func() bool {
		s, err := secrets.Get(e.ctx, key.Name, metav1.GetOptions{})
		return err == nil && slices.Contains(s.Finalizers, finalizer)
	})

	// Deleted together, as a Helm uninstall does.
	c.set("cloud", "sec", "1 NEG not deleted yet")
	if err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(e.ctx, "sec", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := secrets.Delete(e.ctx, key.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the deletion to wait for the cleanup", e.deletingWith("sec", "1 NEG not deleted yet"))
	c.mu.Lock()
	before := c.reads["sec"]
	c.mu.Unlock()
	e.waitFor("the cleanup to read its credentials again after the Secret's deletion", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reads["sec"] > before
	})
	c.mu.Lock()
	readErr := c.readErr["sec"]
	c.mu.Unlock()
	if readErr != nil {
		t.Fatalf("the cleanup could not read its credentials once the Secret was deleted: %v", readErr)
	}
	if s, err := secrets.Get(e.ctx, key.Name, metav1.GetOptions{}); err != nil || s.DeletionTimestamp == nil {
		t.Fatalf("the Secret: %v, %+v; want it kept, being deleted", err, s)
	}

	c.set("cloud", "sec", "")
	e.waitFor("the tenant to go", e.gone("sec"))
	e.waitFor("the Secret to go", func() bool {
		_, err := secrets.Get(e.ctx, key.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestAbandonScopeOnARealAPIServer: the abandon annotation covers the generation at which the manager first saw it.
// Set on a running tenant, it does not cover the tenant's later deletion (the API server counts a deletion as a new
// generation); set again, it abandons the cloud resources, while the in-cluster cleanup runs to the end.
func TestAbandonScopeOnARealAPIServer(t *testing.T) {
	e := newEnv(t)
	c := newCleanups()
	e.startManagerWith(c.cloudProbe(), c.clusterProbe())
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "scope"}, Spec: mpv1alpha1.ProviderConfigSpec{
		Rancher:  &mpv1alpha1.RancherConfig{ClusterID: "c-scope"},
		Pangolin: &mpv1alpha1.PangolinConfig{TunnelNamespace: "tunnels", DefaultTunnel: "main"}}}
	if _, err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("Ready", e.ready("scope"))

	e.annotateAbandon("scope", true)
	var annotatedAt int64
	e.waitFor("the decision to be recorded", func() bool {
		pc, err := e.providerConfig("scope")
		if err != nil || pc.Status.Abandon == nil {
			return false
		}
		annotatedAt = pc.Status.Abandon.Generation
		return annotatedAt == pc.Generation
	})

	c.set("cloud", "scope", "1 NEG not deleted yet")
	c.set("incluster", "scope", "1 PangolinResource")
	if err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(e.ctx, "scope", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the deletion to wait for both cleanups", e.deletingWith("scope", "1 NEG not deleted yet"))
	if pc, _ := e.providerConfig("scope"); pc.Generation <= annotatedAt {
		t.Fatalf("the deletion left generation %d; this test relies on the API server counting it as a new one", pc.Generation)
	}
	e.waitFor("the stale annotation Warning", func() bool {
		return e.warned("default", "scope", providerconfig.EventAbandonAnnotationStale, "abandons nothing")
	})
	if n := c.abandons("cloud", "scope"); n != 0 {
		t.Fatalf("an annotation given before the deletion abandoned its cloud resources (%d calls)", n)
	}

	// A new decision, for the deletion.
	e.annotateAbandon("scope", false)
	e.waitFor("the record to go", func() bool {
		pc, err := e.providerConfig("scope")
		return err == nil && pc.Status.Abandon == nil
	})
	e.annotateAbandon("scope", true)
	e.waitFor("the cloud resources abandoned, the in-cluster cleanup still waited for", func() bool {
		return c.abandons("cloud", "scope") > 0 && e.deletingWith("scope", "does not cover it")()
	})
	e.waitFor("the CloudResourcesAbandoned Event", func() bool {
		return e.warned("default", "scope", providerconfig.EventCloudResourcesAbandoned, "1 NEG left in GCE")
	})
	c.set("incluster", "scope", "")
	e.waitFor("the tenant to go once the in-cluster cleanup finished", e.gone("scope"))
}
