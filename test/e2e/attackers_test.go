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

package e2e

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/clusterid"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// The policies of manifests/admission that keep identities from steering the manager (docs/security.md).
const (
	clusterIDPolicy   = "multiproject-cluster-id"
	leaseLabelsPolicy = "multiproject-lease-labels"
	leaseNamesPolicy  = "multiproject-lease-names"
)

// TestNoIdentitySteersTheManagerBeyondItsGrant pins docs/security.md's identity table on the real API server with
// manifests/ applied: each identity tries what would steer the manager for it, with its own credentials.
//
//   - A stolen manager token re-creates the missing tenant-label gate listing a group of its own, creates another
//     ConfigMap in kube-system, or records another cluster's UID as this cluster's identity: all denied; recording
//     the kube-system Namespace's UID (what the manager does) passes.
//   - Another kube-system component with Lease writes forges a live shard Lease (renewTime far ahead) and a claim
//     record with an early claimant, labels its own Lease into a claim record, renews, unlabels or deletes one of the
//     manager's: all denied; its own Leases pass. Issue 57: it creates the leader-election Lease while it is missing,
//     takes it over (a holder no replica has, a renewTime a year ahead, the longest duration) or deletes it, and
//     creates an unlabeled Lease of a claim record's or a shard Lease's name before the manager does: all denied.
//   - The stolen manager token (base manifests: create on every Lease of kube-system) also creates a Lease of
//     another name there: denied; the manager's own Leases pass.
//   - A tenant user (edit in its namespace) and a tenant admin (also Leases there, and Namespace writes) cannot
//     write either kind of Lease, nor the gate, nor relabel a namespace.
//   - A cluster admin may delete such a Lease (the clean-up path) but not create one without lifting the policy;
//     the namespace controller may delete them once their namespace is being deleted.
func TestNoIdentitySteersTheManagerBeyondItsGrant(t *testing.T) {
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	managerCfg, err := controlPlane.ManagerConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manager := kubernetes.NewForConfigOrDie(managerCfg)
	suffix := rand.String(5)
	group := "e2e-forged-" + suffix // no sharder of this test package runs this group
	shardLabel := map[string]string{sharding.ShardGroupLabel: group}
	claimLabel := map[string]string{claims.KindLabel: "ingress"}
	leases := func(c kubernetes.Interface) func(ns string) leaseWriter {
		return func(ns string) leaseWriter { return leaseWriter{c.CoordinationV1().Leases(ns), ctx} }
	}

	// A shard Lease the manager wrote, for the others to attack; deleted by the admin at the end. Its holder is not
	// its shard, so no sharder of another test would take it for a live shard.
	ownShard := createLease(t, leases(manager)(metav1.NamespaceSystem), sharding.LeaseName(shardGroup, "e2e-"+suffix),
		map[string]string{sharding.ShardGroupLabel: shardGroup}, time.Now())
	resetLease(t) // the leader-election Lease, missing until the neighbour's attempts below
	waitEnforced(t, leaseNamesPolicy, func() error {
		_, err := manager.CoordinationV1().Leases(metav1.NamespaceSystem).Create(ctx,
			newLease("e2e-probe-"+suffix, nil, time.Now()), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	waitEnforced(t, leaseLabelsPolicy, func() error {
		_, err := admin.CoordinationV1().Leases(metav1.NamespaceSystem).Create(ctx,
			newLease("e2e-probe-"+suffix, shardLabel, time.Now()), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	waitEnforced(t, clusterIDPolicy, func() error {
		_, err := manager.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-probe-" + suffix}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})

	t.Run("another kube-system component with Lease writes", func(t *testing.T) {
		neighbour := leases(kubeSystemLeaseWriter(t, "lease-writer-"+suffix))(metav1.NamespaceSystem)
		// Issue 42's forgeries: a shard that looks live for a day, a claimant created before anything else.
		wantPolicyDenial(t, leaseLabelsPolicy, "forge a live shard Lease",
			neighbour.create(newLease(group+"-forged", shardLabel, time.Now().Add(24*time.Hour))))
		record := newLease(claims.RecordName("ingress", "forged.example.com"), claimLabel, time.Now())
		record.Annotations = map[string]string{"multiproject.io/claimed-name": "forged.example.com",
			"multiproject.io/claimant-created": "2000-01-01T00:00:00Z", "multiproject.io/claimant-uid": "forged"}
		wantLeasePolicyDenial(t, "forge a claim record", createOrCleanUp(t, neighbour, record))
		own := createLease(t, neighbour, "neighbour-"+suffix, nil, time.Now())
		wantPolicyDenial(t, leaseLabelsPolicy, "label its own Lease into a claim record", neighbour.relabel(own, claimLabel))
		// Either policy may answer first: the Lease has the label and the name.
		wantLeasePolicyDenial(t, "renew the manager's shard Lease far ahead", neighbour.renew(ownShard, time.Now().Add(24*time.Hour)))
		wantLeasePolicyDenial(t, "unlabel the manager's shard Lease", neighbour.relabel(ownShard, nil))
		wantLeasePolicyDenial(t, "delete the manager's shard Lease", neighbour.delete(ownShard.Name))
		// Its own Leases stay its own: the denials are about the two labels and the manager's names only.
		if err := neighbour.renew(own, time.Now()); err != nil {
			t.Errorf("the neighbour renews its own Lease: %v", err)
		}

		// Issue 57: the unlabeled leader-election Lease, and the names of Leases the manager has not made yet.
		year := time.Now().Add(365 * 24 * time.Hour)
		wantPolicyDenial(t, leaseNamesPolicy, "create the leader-election Lease while it is missing",
			createOrCleanUp(t, neighbour, newLease(leaseName, nil, year)))
		leader := createLease(t, leases(manager)(metav1.NamespaceSystem), leaseName, nil, time.Now())
		wantPolicyDenial(t, leaseNamesPolicy, "take the leader-election Lease over for a year", neighbour.update(leader, func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = ptr.To("no-replica")
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(year))
			l.Spec.LeaseDurationSeconds = ptr.To[int32](math.MaxInt32)
		}))
		wantPolicyDenial(t, leaseNamesPolicy, "delete the leader-election Lease", neighbour.delete(leader.Name))
		record = newLease(claims.RecordName("ingress", "squat.example.com"), nil, time.Now())
		record.Annotations = map[string]string{"multiproject.io/claimed-name": "squat.example.com",
			"multiproject.io/claimant-created": "2000-01-01T00:00:00Z", "multiproject.io/claimant-uid": "forged"}
		wantPolicyDenial(t, leaseNamesPolicy, "create an unlabeled Lease of a claim record's name before the record",
			createOrCleanUp(t, neighbour, record))
		wantPolicyDenial(t, leaseNamesPolicy, "create an unlabeled Lease of a shard Lease's name",
			createOrCleanUp(t, neighbour, newLease(sharding.LeaseName(shardGroup, "squat-"+suffix), nil, year)))
	})
	t.Run("a tenant user", func(t *testing.T) {
		tenantUser := editorOf(t, controlPlane.CreateNamespace(t))
		wantForbidden(t, "write a shard Lease in kube-system",
			leases(tenantUser)(metav1.NamespaceSystem).create(newLease(group+"-user", shardLabel, time.Now())))
		wantForbidden(t, "create the tenant-label gate", createConfigMap(ctx, tenantUser, tenantLabelAdmins, "groups", "system:authenticated"))
	})
	t.Run("a tenant admin", func(t *testing.T) {
		ns := controlPlane.CreateNamespace(t)
		tenantAdmin := namespaceEditor(t, ns)
		grantLeases(t, ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "editor"})
		waitAllowed(t, tenantAdmin, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "coordination.k8s.io", Resource: "leases"})
		wantPolicyDenial(t, leaseLabelsPolicy, "create a claim record in its namespace",
			leases(tenantAdmin)(ns).create(newLease("multiproject-claim-ingress-"+suffix, claimLabel, time.Now())))
		wantForbidden(t, "write a shard Lease in kube-system",
			leases(tenantAdmin)(metav1.NamespaceSystem).create(newLease(group+"-admin", shardLabel, time.Now())))
		_, err := tenantAdmin.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
			labelPatch(mpv1alpha1.DefaultProviderConfigLabelKey, "another-tenant"), metav1.PatchOptions{})
		wantPolicyDenial(t, tenantLabelsPolicy, "move its namespace to another tenant", err)
	})
	t.Run("a cluster admin", func(t *testing.T) {
		adminLeases := leases(admin)(metav1.NamespaceSystem)
		wantPolicyDenial(t, leaseLabelsPolicy, "create a shard Lease", adminLeases.create(newLease(group+"-admin", shardLabel, time.Now())))
		if err := adminLeases.delete(ownShard.Name); err != nil {
			t.Errorf("the admin deletes a shard Lease: %v", err)
		}
		leader := createLease(t, leases(manager)(metav1.NamespaceSystem), leaseName, nil, time.Now())
		if err := adminLeases.delete(leader.Name); err != nil {
			t.Errorf("the admin deletes the leader-election Lease: %v", err)
		}
		terminatingNamespaceIsEmptied(t, manager, group, shardLabel)
	})
	// Last: it removes the tenant-label gate for a while, which the tenant admin's attempt above relies on.
	t.Run("a stolen manager token", func(t *testing.T) {
		// Issue 57: the base's RBAC grants create on every Lease of kube-system (RBAC cannot name a create).
		wantPolicyDenial(t, leaseNamesPolicy, "create a Lease of another component in kube-system",
			createOrCleanUp(t, leases(manager)(metav1.NamespaceSystem), newLease("e2e-component-"+suffix, nil, time.Now())))
		stolenManagerToken(t, manager)
	})
}

// stolenManagerToken: the manager's ServiceAccount may create exactly its cluster identity, holding the kube-system
// Namespace's UID, and no other ConfigMap; the tenant-label gate, missing (its fail-closed state), stays missing.
func stolenManagerToken(t *testing.T, manager kubernetes.Interface) {
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	configMaps := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	if err := configMaps.Delete(ctx, tenantLabelAdmins, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Put the shipped gate back (over whatever a failed run let the token write).
		if _, err := controlPlane.ApplyManifestDir(context.Background(), framework.ProjectAdmissionDir); err != nil {
			t.Errorf("restoring %s: %v", framework.ProjectAdmissionDir, err)
		}
	})
	wantPolicyDenial(t, clusterIDPolicy, "re-create the tenant-label gate listing its own group",
		createConfigMap(ctx, manager, tenantLabelAdmins, "groups", "system:serviceaccounts"))
	wantPolicyDenial(t, clusterIDPolicy, "create another ConfigMap in kube-system",
		createConfigMap(ctx, manager, "multiproject-forged", "config", "{}"))

	seed, err := admin.CoreV1().Namespaces().Get(ctx, clusterid.SeedNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := configMaps.Delete(ctx, clusterid.ConfigMapName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Leave no forged identity behind; the next manager records the real one again.
		if cm, err := configMaps.Get(context.Background(), clusterid.ConfigMapName, metav1.GetOptions{}); err == nil && cm.Data[clusterid.UIDKey] != string(seed.UID) {
			_ = configMaps.Delete(context.Background(), clusterid.ConfigMapName, metav1.DeleteOptions{})
		}
	})
	wantPolicyDenial(t, clusterIDPolicy, "record another cluster's UID",
		createConfigMap(ctx, manager, clusterid.ConfigMapName, clusterid.UIDKey, "0b9e2f3c-another-cluster"))
	if err := createConfigMap(ctx, manager, clusterid.ConfigMapName, clusterid.UIDKey, string(seed.UID)); err != nil {
		t.Errorf("the manager records the kube-system Namespace's UID: %v", err)
	}
}

// tenantLabelAdmins is the gate of manifests/admission/tenant-labels.yaml.
const tenantLabelAdmins = "multiproject-tenant-label-admins"

// terminatingNamespaceIsEmptied: the namespace controller (kube-system/namespace-controller, as clusters run it;
// the test control plane's runs as system:masters) may delete a labeled Lease once its namespace is being deleted,
// and not before, so deleting a namespace that holds one never hangs. A finalizer keeps the Lease there long
// enough to try; the manager, which put it on, takes it off.
func terminatingNamespaceIsEmptied(t *testing.T, manager kubernetes.Interface, group string, shardLabel map[string]string) {
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	ns := controlPlane.CreateNamespace(t)
	grantLeases(t, ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: framework.ManagerServiceAccountNamespace,
		Name: framework.ManagerServiceAccountName})
	waitAllowed(t, manager, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "coordination.k8s.io", Resource: "leases"})
	held := newLease(group+"-in-"+ns, shardLabel, time.Now())
	held.Finalizers = []string{"e2e.multiproject.io/hold"}
	w := leaseWriter{manager.CoordinationV1().Leases(ns), ctx}
	if err := w.create(held); err != nil {
		t.Fatal(err)
	}
	impersonated := rest.CopyConfig(controlPlane.AdminConfig())
	impersonated.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:namespace-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	namespaceController := kubernetes.NewForConfigOrDie(impersonated).CoordinationV1().Leases(ns)
	dryRunDelete := func() error {
		return namespaceController.Delete(ctx, held.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}
	wantPolicyDenial(t, leaseLabelsPolicy, "the namespace controller deletes a shard Lease of a live namespace", dryRunDelete())

	if err := admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dryRunDelete(); err != nil {
		t.Errorf("the namespace controller deletes a shard Lease of a namespace being deleted: %v", err)
	}
	if err := w.update(held, func(l *coordinationv1.Lease) { l.Finalizers = nil }); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the namespace was not deleted once its Lease was let go: %v", err)
	}
}

// leaseWriter writes Leases of one namespace as one identity.
type leaseWriter struct {
	leases interface {
		Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
		Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
		Delete(context.Context, string, metav1.DeleteOptions) error
		Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	}
	ctx context.Context
}

func (w leaseWriter) create(l *coordinationv1.Lease) error {
	_, err := w.leases.Create(w.ctx, l, metav1.CreateOptions{})
	return err
}

// update changes the Lease as it is now, so that each attempt stands on its own.
func (w leaseWriter) update(l *coordinationv1.Lease, change func(*coordinationv1.Lease)) error {
	l, err := w.leases.Get(w.ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(l)
	_, err = w.leases.Update(w.ctx, l, metav1.UpdateOptions{})
	return err
}

func (w leaseWriter) renew(l *coordinationv1.Lease, at time.Time) error {
	return w.update(l, func(l *coordinationv1.Lease) { l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(at)) })
}

func (w leaseWriter) relabel(l *coordinationv1.Lease, labels map[string]string) error {
	return w.update(l, func(l *coordinationv1.Lease) { l.Labels = labels })
}

func (w leaseWriter) delete(name string) error {
	return w.leases.Delete(w.ctx, name, metav1.DeleteOptions{})
}

// newLease is a held Lease renewed at renewed, as a shard Lease is.
func newLease(name string, labels map[string]string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("holder"),
			LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(renewed))}}
}

// createLease creates the Lease through w (which must be allowed to) and has the admin delete it when the test ends.
func createLease(t *testing.T, w leaseWriter, name string, labels map[string]string, renewed time.Time) *coordinationv1.Lease {
	t.Helper()
	l, err := w.leases.Create(w.ctx, newLease(name, labels, renewed), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Lease %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := controlPlane.AdminClient().CoordinationV1().Leases(l.Namespace).Delete(context.Background(), l.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Lease %s/%s: %v", l.Namespace, l.Name, err)
		}
	})
	return l
}

// createOrCleanUp creates the Lease through w, and if that succeeds (it should not) has the admin delete it at once,
// so that the attempts after it stand on their own.
func createOrCleanUp(t *testing.T, w leaseWriter, l *coordinationv1.Lease) error {
	t.Helper()
	err := w.create(l)
	if err == nil {
		if err := controlPlane.AdminClient().CoordinationV1().Leases(metav1.NamespaceSystem).Delete(w.ctx, l.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the Lease %s that should not have been created: %v", l.Name, err)
		}
	}
	return err
}

func createConfigMap(ctx context.Context, c kubernetes.Interface, name, key, value string) error {
	_, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{key: value}}, metav1.CreateOptions{})
	return err
}

// kubeSystemLeaseWriter returns a client for a new ServiceAccount of kube-system that may write every Lease there,
// as many components may (a grant RBAC cannot narrow to names not known in advance).
func kubeSystemLeaseWriter(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	if _, err := admin.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	grantLeases(t, metav1.NamespaceSystem, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: name})
	cfg, err := controlPlane.ServiceAccountConfig(ctx, metav1.NamespaceSystem, name)
	if err != nil {
		t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	waitAllowed(t, c, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "delete", Group: "coordination.k8s.io", Resource: "leases"})
	return c
}

// grantLeases binds subject, in namespace, to a Role that may write every Lease there, until the test ends.
func grantLeases(t *testing.T, namespace string, subject rbacv1.Subject) {
	t.Helper()
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	name := "e2e-lease-writer-" + subject.Name
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{subject}}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().RoleBindings(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admin.RbacV1().Roles(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitAllowed waits until RBAC, which learns of new bindings from its informers, allows c the request.
func waitAllowed(t *testing.T, c kubernetes.Interface, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		review, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		return err == nil && review.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("RBAC never allowed %s %s in %s: %v", attrs.Verb, attrs.Resource, attrs.Namespace, err)
	}
}

// waitEnforced waits until the API server enforces the policy (it loads a policy a moment after it is written):
// until attempt, a dry run, is denied by it. A policy that does not exist is not waited for: the test then shows
// what happens without it.
func waitEnforced(t *testing.T, policy string, attempt func() error) {
	t.Helper()
	_, err := controlPlane.AdminClient().AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(t.Context(), policy, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Logf("the admission policy %s is not installed", policy)
		return
	}
	var last error
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = attempt()
		return isDeniedBy(last, policy), nil
	})
	if err != nil {
		t.Fatalf("the policy %s is never enforced: %v (last: %v)", policy, err, last)
	}
}

func isDeniedBy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

func wantPolicyDenial(t *testing.T, policy, what string, err error) {
	t.Helper()
	if !isDeniedBy(err, policy) {
		t.Errorf("%s: got %v, want the denial of the admission policy %s", what, err, policy)
		return
	}
	t.Logf("%s: %v", what, err)
}

// wantLeasePolicyDenial wants a denial of either Lease policy: a write that both deny gets the first one's.
func wantLeasePolicyDenial(t *testing.T, what string, err error) {
	t.Helper()
	if !isDeniedBy(err, leaseLabelsPolicy) && !isDeniedBy(err, leaseNamesPolicy) {
		t.Errorf("%s: got %v, want the denial of the admission policy %s or %s", what, err, leaseLabelsPolicy, leaseNamesPolicy)
		return
	}
	t.Logf("%s: %v", what, err)
}

func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: got %v, want Forbidden", what, err)
	}
}
