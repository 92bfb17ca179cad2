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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// EventSecretNotProtected says that the manager could not put its in-use finalizer on a Secret the tenant reads
// credentials from (it may not write it), so deleting that Secret can still wedge the tenant's cleanup.
const EventSecretNotProtected = "SecretNotProtected"

// SecretInUseFinalizer is the finalizer that keeps a Secret the named tenant needs from being deleted. A finalizer
// is a qualified name, whose part after the prefix has at most 63 characters, while a ProviderConfig's name may have
// up to 253: a longer name is cut and followed by a hash of the whole, so that it stays the tenant's own.
func SecretInUseFinalizer(tenantName string) string {
	const nameMaxLength = 63 // of a qualified name's part after the prefix
	if len(tenantName) <= nameMaxLength {
		return mpv1alpha1.SecretInUseFinalizerPrefix + tenantName
	}
	sum := sha256.Sum256([]byte(tenantName))
	const hashLength = 10
	cut := tenantName[:nameMaxLength-hashLength-1]
	return mpv1alpha1.SecretInUseFinalizerPrefix + cut + "-" + hex.EncodeToString(sum[:])[:hashLength]
}

// SecretsInUse returns the Secrets that the controllers configured by any of specs, or their cleanups, read
// (Factory.Secrets), sorted by namespace and name. A nil spec is skipped.
func (m *Manager) SecretsInUse(specs ...*mpv1alpha1.ProviderConfigSpec) []mpv1alpha1.SecretReference {
	seen := sets.New[mpv1alpha1.SecretReference]()
	for _, f := range append(slices.Clone(m.cfg.Enabled), m.cfg.Disabled...) {
		if f.Secrets == nil {
			continue
		}
		for _, spec := range specs {
			if spec != nil {
				seen.Insert(f.Secrets(spec)...)
			}
		}
	}
	return sortedSecrets(seen)
}

func sortedSecrets(s sets.Set[mpv1alpha1.SecretReference]) []mpv1alpha1.SecretReference {
	if s.Len() == 0 {
		return nil
	}
	out := s.UnsortedList()
	slices.SortFunc(out, func(a, b mpv1alpha1.SecretReference) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// protectSecrets lists in status.secretsInUse every Secret the tenant's controllers or their cleanups read (from
// the spec and from status.appliedSpec), then puts the tenant's in-use finalizer on each: listed before protected,
// so every finalizer the manager adds is one it finds again to remove. A Secret already protected by this process
// is not read again. It returns the ProviderConfig as it is now, or nil when it is gone.
func (c *Controller) protectSecrets(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
	want := c.manager.SecretsInUse(&pc.Spec, pc.Status.AppliedSpec)
	c.rememberSecrets(pc.Name, pc.Status.SecretsInUse)
	if len(want) == 0 {
		return pc, nil
	}
	all := sets.New(pc.Status.SecretsInUse...).Insert(want...)
	if all.Len() != len(pc.Status.SecretsInUse) {
		next := pc.Status.DeepCopy()
		next.SecretsInUse = sortedSecrets(all)
		updated, err := PatchStatus(ctx, c.client, pc, *next)
		if err != nil || updated == nil {
			return updated, err
		}
		pc = updated
		c.rememberSecrets(pc.Name, pc.Status.SecretsInUse)
	}
	for _, ref := range want {
		c.secretsMu.Lock()
		done := c.protected[pc.Name].Has(ref)
		c.secretsMu.Unlock()
		if done {
			continue
		}
		protected, err := c.addSecretFinalizer(ctx, pc, ref)
		if err != nil {
			return nil, err
		}
		if protected {
			c.secretsMu.Lock()
			if c.protected[pc.Name] == nil {
				c.protected[pc.Name] = sets.New[mpv1alpha1.SecretReference]()
			}
			c.protected[pc.Name].Insert(ref)
			c.secretsMu.Unlock()
		}
	}
	return pc, nil
}

// releaseSecrets removes the tenant's in-use finalizer from every Secret status.secretsInUse lists that keep does
// not, then drops them from the list. It returns the ProviderConfig as it is now, or nil when it is gone.
func (c *Controller) releaseSecrets(ctx context.Context, pc *mpv1alpha1.ProviderConfig, keep []mpv1alpha1.SecretReference) (*mpv1alpha1.ProviderConfig, error) {
	kept := sets.New(keep...)
	var left []mpv1alpha1.SecretReference
	released := false
	for _, ref := range pc.Status.SecretsInUse {
		if kept.Has(ref) {
			left = append(left, ref)
			continue
		}
		if err := c.removeSecretFinalizer(ctx, pc.Name, ref); err != nil {
			return nil, err
		}
		klog.FromContext(ctx).V(2).Info("Released a Secret the tenant no longer needs", "secret", klog.KRef(ref.Namespace, ref.Name))
		released = true
	}
	if !released {
		return pc, nil
	}
	next := pc.Status.DeepCopy()
	next.SecretsInUse = left
	updated, err := PatchStatus(ctx, c.client, pc, *next)
	if err != nil || updated == nil {
		return updated, err
	}
	c.rememberSecrets(pc.Name, left)
	return updated, nil
}

// releaseVanished releases the Secrets of a tenant whose ProviderConfig went without the manager's finalizer (it
// was stripped by hand), from what the last sync saw listed. The informer of a sharded replica shows only its own
// tenants, so the API server is asked first whether the ProviderConfig is gone, not moved to another shard.
func (c *Controller) releaseVanished(ctx context.Context, name string) error {
	c.secretsMu.Lock()
	refs := c.listed[name]
	c.secretsMu.Unlock()
	if len(refs) > 0 {
		if _, err := c.client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			if err != nil {
				return err
			}
			refs = nil // it exists: its owner, this replica or another, releases what it no longer needs
		}
	}
	for _, ref := range refs {
		if err := c.removeSecretFinalizer(ctx, name, ref); err != nil {
			return err
		}
	}
	c.secretsMu.Lock()
	delete(c.listed, name)
	delete(c.protected, name)
	c.secretsMu.Unlock()
	return nil
}

// rememberSecrets keeps what status.secretsInUse lists for releaseVanished, and forgets protections it no longer
// lists.
func (c *Controller) rememberSecrets(name string, listed []mpv1alpha1.SecretReference) {
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	if len(listed) == 0 {
		delete(c.listed, name)
		delete(c.protected, name)
		return
	}
	c.listed[name] = slices.Clone(listed)
	if p := c.protected[name]; p != nil {
		c.protected[name] = p.Intersection(sets.New(listed...))
	}
}

// addSecretFinalizer puts the tenant's in-use finalizer on the Secret. It reports whether the Secret is protected
// now; a Secret that does not exist (yet) is not, and is looked at again on the next sync.
func (c *Controller) addSecretFinalizer(ctx context.Context, pc *mpv1alpha1.ProviderConfig, ref mpv1alpha1.SecretReference) (bool, error) {
	finalizer := SecretInUseFinalizer(pc.Name)
	secrets := c.manager.cfg.KubeClient.CoreV1().Secrets(ref.Namespace)
	secret, err := secrets.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsForbidden(err):
		c.secretNotProtected(pc, ref, err)
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading Secret %s/%s to protect it: %w", ref.Namespace, ref.Name, err)
	case slices.Contains(secret.Finalizers, finalizer):
		return true, nil
	case secret.DeletionTimestamp != nil:
		// Too late: the API server adds no finalizer to an object being deleted.
		c.recorder.Eventf(pc, corev1.EventTypeWarning, EventSecretNotProtected,
			"Secret %s/%s, which the tenant reads credentials from, was already being deleted", ref.Namespace, ref.Name)
		return true, nil
	}
	if err := patchFinalizers(ctx, secrets.Patch, secret.ObjectMeta, append(slices.Clone(secret.Finalizers), finalizer)); err != nil {
		if apierrors.IsForbidden(err) {
			c.secretNotProtected(pc, ref, err)
			return true, nil
		}
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("protecting Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return true, nil
}

func (c *Controller) secretNotProtected(pc *mpv1alpha1.ProviderConfig, ref mpv1alpha1.SecretReference, err error) {
	c.recorder.Eventf(pc, corev1.EventTypeWarning, EventSecretNotProtected,
		"Secret %s/%s, which the tenant reads credentials from, cannot be protected from deletion (%v): grant the manager patch on Secrets in %s (docs/security.md)",
		ref.Namespace, ref.Name, err, ref.Namespace)
}

// removeSecretFinalizer takes the tenant's in-use finalizer off the Secret, if it is there.
func (c *Controller) removeSecretFinalizer(ctx context.Context, tenantName string, ref mpv1alpha1.SecretReference) error {
	finalizer := SecretInUseFinalizer(tenantName)
	secrets := c.manager.cfg.KubeClient.CoreV1().Secrets(ref.Namespace)
	secret, err := secrets.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		// Gone, or never readable (so never protected).
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s/%s to release it: %w", ref.Namespace, ref.Name, err)
	}
	if !slices.Contains(secret.Finalizers, finalizer) {
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(secret.Finalizers), func(f string) bool { return f == finalizer })
	if err := patchFinalizers(ctx, secrets.Patch, secret.ObjectMeta, rest); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return nil
}

type patchFunc func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Secret, error)

// patchFinalizers sets an object's finalizers with a merge patch that carries its resourceVersion, so a concurrent
// change of the list (another tenant's finalizer) makes it fail with a conflict, retried by the workqueue, instead
// of being overwritten.
func patchFinalizers(ctx context.Context, patch patchFunc, obj metav1.ObjectMeta, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": obj.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = patch(ctx, obj.Name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}
