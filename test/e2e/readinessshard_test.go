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
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// maxNewlyCoveredRounds bounds how many namespaces the test brings into the running tenant's shard selector one after
// the other. Each change relists every scoped informer after its own random client-go backoff (0.8 to 1.6 s,
// doubling with each change within two minutes), so the Pods' LIST is delivered before the Services' in about half
// of the changes, by up to seconds; the test stops at the first round that had the Pod before its namespace was
// read (the Pod says it waits for that), which without the check is a round that fails. Four rounds all miss the
// window about once in sixteen runs, and the test says so.
const maxNewlyCoveredRounds = 4

// waitingForTheNamespace starts the message of a Pod that waits for its namespace to be read (readiness/decide.go).
const waitingForTheNamespace = "Waiting for this replica to read the Services and Translations"

// TestReadinessGateWaitsForANewlyCoveredNamespace: one replica on --sharding and --sharded-watch runs a tenant; a
// namespace it does not read yet already holds a NEG Service and a running gated Pod that it selects. Labeling the
// namespace for the tenant widens the shard selector, and each scoped informer lists it again in turn. From its
// labeling on, every change of the Pod is watched: the gate condition never turns True before the fake GCE has
// recorded an attach into the NEG that ends up holding the Pod's IP, and it turns True as attached, not as "in no
// NEG" (readiness answers no NEG only once every informer has listed with the new selector,
// informerset.ShardScope.ListedCurrent).
func TestReadinessGateWaitsForANewlyCoveredNamespace(t *testing.T) {
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	attaches := &attachRecord{first: map[string]time.Time{}}
	gce := fakegce.New(fakegce.Options{OnCall: attaches.record})
	gce.Start()
	t.Cleanup(gce.Close)
	w := newWorkload(t, gce)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "newly-covered", managerKubeconfig(t), gce.Endpoint(), le, "--sharding=true", "--sharded-watch=true")
	waitShardsRun(t, []*workload{w}, shardNames(t, []*manager{m}))

	raced := false
	for round := 0; round < maxNewlyCoveredRounds && !raced; round++ {
		ns := namespaceInANewBucket(t, w)
		in := &workload{t: t, ctx: w.ctx, kube: w.kube, gce: gce, tenant: w.tenant, project: w.project, appNS: ns}
		startKubelet(t, in, []string{w.nodeName(0, 0)}, netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", round)))
		createNEGService(t, in, "web")
		pod := createGatedPod(t, in, "gated", "web")
		p := waitPodState(t, in, pod, "with an IP", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
		watcher, err := w.kube.CoreV1().Pods(ns).Watch(w.ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", pod).String(), ResourceVersion: p.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		w.patchNamespaceLabels(ns, map[string]*string{labelKey: &w.tenant})

		changes, trueAt, reason, waited := watchGateUntilTrue(t, watcher)
		raced = waited || reason == reasonNEGReady
		watcher.Stop()
		t.Logf("round %d: gate condition changes %v", round, changes)
		neg := waitNEGHolding(t, in, p.Status.PodIP)
		attachedAt, attached := attaches.firstOf(w.project, neg)
		if !attached || trueAt.Before(attachedAt) {
			t.Errorf("round %d: Pod %s/%s's gate condition was True (%s) at %s, before the first attach into NEG %s "+
				"(at %s, recorded %t); its gate condition changes: %v", round, ns, pod, reason, trueAt.Format(time.StampMicro),
				neg, attachedAt.Format(time.StampMicro), attached, changes)
		}
		if reason != reasonNEGWithoutHealthCheck {
			t.Errorf("round %d: Pod %s/%s passed the gate with %s, want %s; its gate condition changes: %v",
				round, ns, pod, reason, reasonNEGWithoutHealthCheck, changes)
		}
	}
	if !raced {
		t.Logf("in %d rounds the Services were always read before the Pod: the window was not exercised", maxNewlyCoveredRounds)
	}
	stopManagers(t, m)
}

// namespaceInANewBucket creates a namespace, not yet the tenant's, whose hash bucket holds none of the tenant's
// namespaces: labeling it for the tenant changes the replica's shard selector.
func namespaceInANewBucket(t *testing.T, w *workload) string {
	t.Helper()
	held := bucketsOf(t, []*workload{w})
	for range 10 {
		if ns := controlPlane.CreateNamespace(t); !held.Has(sharding.NamespaceBucket(ns)) {
			return ns
		}
	}
	t.Fatalf("ten namespaces in a row hashed into buckets the tenant holds (%d)", held.Len())
	return ""
}

// watchGateUntilTrue reads the Pod's watch until its gate condition is True and returns every change of that
// condition seen (when received, status, reason, message), when the True was received, its reason, and whether the
// Pod waited for its namespace to be read.
func watchGateUntilTrue(t *testing.T, watcher watch.Interface) (changes []string, trueAt time.Time, reason string, waited bool) {
	t.Helper()
	timeout := time.After(convergeTimeout)
	var last corev1.PodCondition
	for {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatalf("the Pod's watch ended before its gate condition was True; changes: %v", changes)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				t.Fatalf("the Pod's watch sent %s %T", ev.Type, ev.Object)
			}
			at := time.Now()
			c := podCondition(p, negReadyGate)
			if c == nil || (c.Status == last.Status && c.Reason == last.Reason) {
				continue
			}
			last = *c
			waited = waited || strings.HasPrefix(c.Message, waitingForTheNamespace)
			changes = append(changes, fmt.Sprintf("%s %s %s (%s)", at.Format(time.StampMicro), c.Status, c.Reason, c.Message))
			if c.Status == corev1.ConditionTrue {
				return changes, at, c.Reason, waited
			}
		case <-timeout:
			t.Fatalf("the Pod's gate condition was not True within %s; changes: %v", convergeTimeout, changes)
		}
	}
}

// waitNEGHolding waits until a NEG of the workload's project in the first zone holds ip and returns its name.
func waitNEGHolding(t *testing.T, w *workload, ip string) string {
	t.Helper()
	var name string
	err := wait.PollUntilContextTimeout(w.ctx, 100*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		for _, n := range w.gce.NEGs(w.project) {
			eps, _ := w.gce.Endpoints(w.project, path.Base(n.Zone), n.Name)
			for _, ep := range eps {
				if ep.IpAddress == ip {
					name = n.Name
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no NEG of %s holds %s within %s", w.project, ip, convergeTimeout)
	}
	return name
}

// attachRecord is when the fake GCE first answered an attach into each NEG, by project and NEG name.
type attachRecord struct {
	mu    sync.Mutex
	first map[string]time.Time
}

func (a *attachRecord) record(r fakegce.CallRecord) {
	if r.Method != fakegce.MethodAttachEndpoints || r.Status != http.StatusOK {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.first[r.Project+"/"+r.Resource]; !seen {
		a.first[r.Project+"/"+r.Resource] = r.Time
	}
}

func (a *attachRecord) firstOf(project, neg string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.first[project+"/"+neg]
	return at, ok
}
