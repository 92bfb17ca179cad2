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
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// holdFinalizer is the test's finalizer on the first publisher's PangolinResource: it stands in for the Pangolin
// operator's, which keeps the resource (and the host published) until the remote resource is gone.
const holdFinalizer = "e2e.multiproject.io/hold"

// TestAHeldPublisherBlocksAnotherShardsClaimant: two replicas with --sharding and --sharded-watch, and two tenants
// on different shards, so neither replica reads the other's namespaces. The first tenant's Ingress publishes a
// host. The second tenant's user edits an older Ingress of their own to claim it: it gets HostConflict and the
// first's PangolinResource stays (the same UID); so does the second's Ingress created later. Then the first's Ingress lets the host go
// (moved to another class) while a finalizer holds its PangolinResource, which still publishes the host: the second
// tenant's replica, which cannot see that object, must keep retrying without publishing, and publish once the
// object is gone. A watch of every PangolinResource, running through the whole test, records every state: it
// fails the test if two ever published the host at once (a resource being deleted counts until its DELETED event,
// so the second's is created only after the first's is gone).
func TestAHeldPublisherBlocksAnotherShardsClaimant(t *testing.T) {
	began := time.Now()
	resetLease(t)
	cleanupShardLeases(t)
	cleanupClaimRecords(t)
	installShardedRBAC(t)
	gce := startFakeGCE(t)
	// Three tenants over two shards: the bounded loads (at most 2 a shard) put at least one on each.
	ws := []*workload{newWorkload(t, gce), newWorkload(t, gce), newWorkload(t, gce)}
	kubeconfig := managerKubeconfig(t)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	replicas := []*manager{
		startManager(t, "held-a", kubeconfig, gce.Endpoint(), le, "--sharding=true", "--sharded-watch=true"),
		startManager(t, "held-b", kubeconfig, gce.Endpoint(), le, "--sharding=true", "--sharded-watch=true"),
	}
	names := shardNames(t, replicas)
	waitShardsRun(t, ws, names)
	onA, onB := tenantsOn(t, ws, names[0]), tenantsOn(t, ws, names[1])
	if len(onA) == 0 || len(onB) == 0 {
		t.Fatalf("the shards run %d and %d tenants; the test needs one on each", len(onA), len(onB))
	}
	first, second := onA[0], onB[0]
	start := time.Now()
	t.Logf("%s: tenants %s and %s run on shards %v", time.Since(began).Round(time.Millisecond), first.tenant, second.tenant, names)
	host := "held-" + first.tenant + ".example.com"
	counter := countPublishers(t, first.mp, host)

	// The second tenant's user has an older Ingress, publishing another host.
	userB := editorOf(t, second.appNS)
	otherHost := "other-" + first.tenant + ".example.com"
	if _, err := userB.NetworkingV1().Ingresses(second.appNS).Create(t.Context(), pangolinIngress(second.appNS, "old", otherHost), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the second tenant's user creating an Ingress: %v", err)
	}
	waitPublishedIn(t, second, otherHost)

	first.setIngress("web", host)
	held := waitPublishedIn(t, first, host)
	heldUID := resourceUID(t, first, held)
	holdResource(t, first, held)

	// The user edits the older Ingress to the first tenant's host: its replica, which reads neither the first
	// tenant's namespace nor its objects, must leave the host to the one publishing it.
	old, err := userB.NetworkingV1().Ingresses(second.appNS).Get(t.Context(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old.Spec.Rules[0].Host = host
	if _, err := userB.NetworkingV1().Ingresses(second.appNS).Update(t.Context(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the second tenant's user changing its older Ingress's host: %v", err)
	}
	waitEvent(second.ctx, t, "Ingress", second.appNS, "old", ingresstunnel.ReasonHostConflict, host, "Ingress "+first.appNS+"/web")
	second.setIngress("web", host)
	waitEvent(second.ctx, t, "Ingress", second.appNS, "web", ingresstunnel.ReasonHostConflict, host, "Ingress "+first.appNS+"/web")
	if uid := resourceUID(t, first, held); uid != heldUID {
		t.Fatalf("the first tenant's PangolinResource %s was replaced or deleted (UID %q, was %s)", held, uid, heldUID)
	}
	if r, err := first.mp.TunnelV1alpha1().PangolinResources(first.appNS).Get(t.Context(), held, metav1.GetOptions{}); err != nil || r.DeletionTimestamp != nil {
		t.Fatalf("the first tenant's PangolinResource %s is being deleted (%v)", held, err)
	}

	t.Logf("%s: tenant %s publishes %s, tenant %s was told of the conflict", time.Since(start).Round(time.Millisecond), first.tenant, host, second.tenant)
	// The first Ingress lets the host go; its replica deletes the resource, which the finalizer keeps.
	first.unmanageIngress("web")
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := first.mp.TunnelV1alpha1().PangolinResources(first.appNS).Get(ctx, held, metav1.GetOptions{})
		return err == nil && r.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Fatalf("the first tenant's replica never deleted PangolinResource %s/%s", first.appNS, held)
	}
	// The second claimant takes the record over and then retries, with backoff, while the object publishes.
	errorsBefore := waitRecordHeldBy(t, second, host, replicas)
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return syncErrors(t, replicas, second.tenant) >= errorsBefore+3 || len(publishedIn(t, second, host)) > 0, nil
	})
	if err != nil {
		t.Fatalf("the second tenant's replica never tried again while the first's PangolinResource was held: nothing woke it")
	}
	if got := publishedIn(t, second, host); len(got) > 0 {
		t.Fatalf("the second tenant published %s (%v) while the first's PangolinResource, being deleted, still did", host, got)
	}

	t.Logf("%s: the second claimant took the record over and retried while the first's resource was held", time.Since(start).Round(time.Millisecond))
	releaseResource(t, first, held)
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(publishedIn(t, second, host)) == 1, nil
	})
	if err != nil {
		t.Fatalf("the second tenant never published %s after the first's PangolinResource was gone", host)
	}
	t.Logf("%s: the second tenant publishes %s", time.Since(start).Round(time.Millisecond), host)
	if n := counter.stop(); n != 1 {
		t.Errorf("%d PangolinResources published %s at once, want 1", n, host)
	}
	stopManagers(t, replicas...)
}

// publishedIn lists the PangolinResources of w's app namespace that publish host.
func publishedIn(t *testing.T, w *workload, host string) []string {
	t.Helper()
	list, err := w.mp.TunnelV1alpha1().PangolinResources(w.appNS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list.Items {
		if r.Spec.HTTPConfig != nil && r.Spec.HTTPConfig.Subdomain+"."+r.Spec.HTTPConfig.DomainName == host {
			out = append(out, r.Name)
		}
	}
	return out
}

func waitPublishedIn(t *testing.T, w *workload, host string) string {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		got = publishedIn(t, w, host)
		return len(got) == 1, nil
	})
	if err != nil {
		t.Fatalf("tenant %s never published %s (%v)", w.tenant, host, got)
	}
	return got[0]
}

// holdResource puts the test's finalizer on a PangolinResource, and takes it off when the test ends, whatever the
// outcome, so the namespace can go.
func holdResource(t *testing.T, w *workload, name string) {
	t.Helper()
	changeFinalizers(t, w, name, func(f []string) []string { return append(f, holdFinalizer) })
	t.Cleanup(func() { releaseResource(t, w, name) })
}

func releaseResource(t *testing.T, w *workload, name string) {
	t.Helper()
	changeFinalizers(t, w, name, func(f []string) []string {
		return slices.DeleteFunc(f, func(s string) bool { return s == holdFinalizer })
	})
}

func changeFinalizers(t *testing.T, w *workload, name string, change func([]string) []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := w.mp.TunnelV1alpha1().PangolinResources(w.appNS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Finalizers = change(r.Finalizers)
		_, err = client.Update(ctx, r, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("changing the finalizers of PangolinResource %s/%s: %v", w.appNS, name, err)
	}
}

// waitRecordHeldBy waits until the claim record of host names w's tenant, and returns the failed syncs of that
// tenant's controllers so far.
func waitRecordHeldBy(t *testing.T, w *workload, host string, replicas []*manager) float64 {
	t.Helper()
	leases := controlPlane.AdminClient().CoordinationV1().Leases(metav1.NamespaceSystem)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := leases.Get(ctx, claims.RecordName("Ingress", host), metav1.GetOptions{})
		return err == nil && lease.Annotations["multiproject.io/claimant-tenant"] == w.tenant, nil
	})
	if err != nil {
		t.Fatalf("the claim record of %s never named tenant %s", host, w.tenant)
	}
	return syncErrors(t, replicas, w.tenant)
}

// syncErrors sums the failed (or waiting) syncs of tenant's controllers over the replicas.
func syncErrors(t *testing.T, replicas []*manager, tenant string) float64 {
	t.Helper()
	client := adminHTTPClient(t)
	defer client.CloseIdleConnections()
	var n float64
	for _, m := range replicas {
		for _, s := range scrape(t, client, m)["multiproject_controller_syncs_total"] {
			if string(s.Metric["provider_config"]) == tenant && s.Metric["controller"] == "ingress-tunnel" && s.Metric["result"] == "error" {
				n += float64(s.Value)
			}
		}
	}
	return n
}

// resourceUID returns the UID of w's PangolinResource name, "" when it is gone.
func resourceUID(t *testing.T, w *workload, name string) types.UID {
	t.Helper()
	r, err := w.mp.TunnelV1alpha1().PangolinResources(w.appNS).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.UID
}
