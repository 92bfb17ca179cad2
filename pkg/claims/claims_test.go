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

package claims

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// The tests publish names with ConfigMaps: data "name" is the name, annotation "owner" the claimant's UID.
func configMapHolding(obj any) (Holding, bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Data["name"] == "" {
		return Holding{}, false
	}
	h := Holding{Names: []string{cm.Data["name"]}, Holder: "ConfigMap " + cm.Namespace + "/" + cm.Name}
	if owner := cm.Annotations["owner"]; owner != "" {
		h.Owner, h.Holder = types.UID(owner), "Ingress "+cm.Namespace+"/"+cm.Annotations["owner-name"]
	}
	return h, true
}

// world is a cluster of ConfigMaps and the tenants that join its registry.
type world struct {
	t        *testing.T
	ctx      context.Context
	kube     *kubefake.Clientset
	informer *countingInformer
	set      *Service
}

var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// kind is the Kind the tests claim: names published by ConfigMaps.
var kind = Kind{Name: "Ingress", Holdings: configMaps, HoldingOf: configMapHolding}

func newWorld(t *testing.T, objects ...*corev1.ConfigMap) *world {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var objs []runtimeObject
	for _, o := range objects {
		objs = append(objs, o)
	}
	kube := kubefake.NewClientset(objs...)
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	w := &world{t: t, ctx: ctx, kube: kube, informer: &countingInformer{SharedIndexInformer: factory.Core().V1().ConfigMaps().Informer()}}
	w.set = NewService(ServiceConfig{Informers: w.informers})
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		if err := w.set.Close(); err != nil {
			t.Error(err)
		}
		cancel()
		factory.Shutdown()
	})
	return w
}

func (w *world) informers(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	return w.informer, gvr == configMaps
}

// tenant is one member and the keys the registry enqueued for it.
type tenant struct {
	*Member
	queued chan string
}

func (w *world) join(name string) *tenant {
	w.t.Helper()
	queued := make(chan string, 100)
	m, err := w.set.Join(kind, name, func(key string) { queued <- key })
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(m.Leave)
	if !cache.WaitForCacheSync(w.ctx.Done(), m.HasSynced) {
		w.t.Fatal("the registry never synced")
	}
	return &tenant{Member: m, queued: queued}
}

// next waits for the next enqueued key; the timeout only bounds a failing test.
func (tn *tenant) next(t *testing.T) string {
	t.Helper()
	select {
	case key := <-tn.queued:
		return key
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was enqueued")
		return ""
	}
}

func (tn *tenant) nothingQueued(t *testing.T) {
	t.Helper()
	select {
	case key := <-tn.queued:
		t.Fatalf("%s was enqueued", key)
	default:
	}
}

func claimant(key string, uid types.UID, created time.Time) Claimant {
	return Claimant{Key: key, UID: uid, Created: metav1.NewTime(created)}
}

func published(namespace, name, publishes string, owner Claimant) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"name": publishes}}
	if owner.UID != "" {
		cm.Annotations = map[string]string{"owner": string(owner.UID), "owner-name": owner.Key[len(namespace)+1:]}
	}
	return cm
}

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func TestEarliestClaimHoldsAndTheNextTakesOver(t *testing.T) {
	w := newWorld(t)
	a, b := w.join("tenant-a"), w.join("tenant-b")
	first := claimant("ns-a/web", "uid-9", t0)
	second := claimant("ns-b/web", "uid-1", t0.Add(time.Second))
	a.Claim(first, []string{"app.example.com"})
	b.Claim(second, []string{"app.example.com", "other.example.com"})
	// The first claim made first the holder; the second changed nothing for it.
	if key := a.next(t); key != "ns-a/web" {
		t.Fatalf("enqueued %s", key)
	}
	a.nothingQueued(t)

	if holder, isSelf := b.Holder("app.example.com", second); isSelf || holder.Key != "ns-a/web" || b.Describe(holder) != "Ingress ns-a/web" {
		t.Errorf("holder of app.example.com for the second = %+v (self %v), want the first", holder, isSelf)
	}
	if _, isSelf := a.Holder("app.example.com", first); !isSelf {
		t.Error("the first claimant does not hold its host")
	}
	if _, isSelf := b.Holder("other.example.com", second); !isSelf {
		t.Error("the second claimant does not hold the host only it claims")
	}

	// The first lets go: the second is enqueued in its own tenant, and holds the host.
	for len(b.queued) > 0 {
		<-b.queued
	}
	a.Claim(first, nil)
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s in tenant b", key)
	}
	if _, isSelf := b.Holder("app.example.com", second); !isSelf {
		t.Error("the second claimant did not take the host over")
	}
}

func TestWithinOneSecondTheSmallerUIDHolds(t *testing.T) {
	w := newWorld(t)
	a := w.join("tenant-a")
	x, y := claimant("ns/x", "uid-b", t0), claimant("ns/y", "uid-a", t0)
	a.Claim(x, []string{"h"})
	a.Claim(y, []string{"h"})
	if holder, _ := a.Holder("h", x); holder.Key != "ns/y" {
		t.Errorf("holder = %s, want ns/y (same second, smaller UID)", holder.Key)
	}
	// The holder changed from x to y: both were enqueued.
	got := map[string]bool{a.next(t): true, a.next(t): true, a.next(t): true}
	if !got["ns/x"] || !got["ns/y"] {
		t.Errorf("enqueued %v, want both claimants", got)
	}
}

// TestLeavingReleasesTheTenantsClaims: a tenant whose controller stops claims nothing any more.
func TestLeavingReleasesTheTenantsClaims(t *testing.T) {
	w := newWorld(t)
	a, b := w.join("tenant-a"), w.join("tenant-b")
	first, second := claimant("ns-a/web", "uid-1", t0), claimant("ns-b/web", "uid-2", t0.Add(time.Hour))
	a.Claim(first, []string{"h"})
	b.Claim(second, []string{"h"})
	for len(b.queued) > 0 {
		<-b.queued
	}
	a.Leave()
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s", key)
	}
	if _, isSelf := b.Holder("h", second); !isSelf {
		t.Error("the host stayed with a tenant that left")
	}
	// A late event of the departed tenant claims nothing.
	a.Claim(first, []string{"h"})
	if _, isSelf := b.Holder("h", second); !isSelf {
		t.Error("a departed tenant claimed a host again")
	}
}

func TestReserveWaitsUntilAnotherClaimantsObjectIsGone(t *testing.T) {
	first, second := claimant("ns-a/web", "uid-1", t0), claimant("ns-b/web", "uid-2", t0.Add(time.Hour))
	w := newWorld(t, published("ns-a", "res-a", "h", first), published("ns-x", "by-hand", "other", Claimant{}))
	a, b := w.join("tenant-a"), w.join("tenant-b")

	// Its own object does not stand in the way of the first claimant.
	if _, ok := a.Reserve("h", first, "ns-a/res-a2"); !ok {
		t.Fatal("the first claimant was refused because of its own object")
	}
	a.Created("h", "ns-a/res-a2", false)

	if holder, ok := b.Reserve("h", second, "ns-b/res-b"); ok || holder != "Ingress ns-a/web" {
		t.Fatalf("Reserve = %q, %v; want a refusal naming the first's Ingress", holder, ok)
	}
	if holder, ok := b.Reserve("other", second, "ns-b/res-other"); ok || holder != "ConfigMap ns-x/by-hand" {
		t.Fatalf("Reserve = %q, %v; want a refusal naming the object made by hand", holder, ok)
	}

	if err := w.kube.CoreV1().ConfigMaps("ns-a").Delete(w.ctx, "res-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s", key)
	}
	if holder, ok := b.Reserve("h", second, "ns-b/res-b"); !ok {
		t.Fatalf("Reserve after the deletion refused, because of %q", holder)
	}
}

// TestAReservationExcludesAnotherUntilTheObjectIsSeen: between a create call and the informer showing the object,
// the reservation stands for it.
func TestAReservationExcludesAnotherUntilTheObjectIsSeen(t *testing.T) {
	w := newWorld(t)
	a, b := w.join("tenant-a"), w.join("tenant-b")
	first, second := claimant("ns-a/web", "uid-1", t0), claimant("ns-b/web", "uid-2", t0)
	if _, ok := a.Reserve("h", first, "ns-a/res-a"); !ok {
		t.Fatal("the first reservation was refused")
	}
	if holder, ok := b.Reserve("h", second, "ns-b/res-b"); ok || holder != "Ingress ns-a/web" {
		t.Fatalf("Reserve = %q, %v; want a refusal naming the reserving Ingress", holder, ok)
	}
	// The create failed: the name is free again, and the waiting claimant is told.
	a.Created("h", "ns-a/res-a", false)
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s", key)
	}
	if _, ok := b.Reserve("h", second, "ns-b/res-b"); !ok {
		t.Fatal("the name stayed reserved after a failed create")
	}
	// This create succeeds; once the object is seen, the object itself stands in the way.
	if _, err := w.kube.CoreV1().ConfigMaps("ns-b").Create(w.ctx, published("ns-b", "res-b", "h", second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Created("h", "ns-b/res-b", true)
	if holder, ok := a.Reserve("h", first, "ns-a/res-a"); ok || holder != "Ingress ns-b/web" {
		t.Fatalf("Reserve = %q, %v; want a refusal naming the created object's Ingress", holder, ok)
	}
}

// TestConcurrentReservationsGrantOne: workers of many tenants asking at once get one yes.
func TestConcurrentReservationsGrantOne(t *testing.T) {
	w := newWorld(t)
	const n = 20
	members := make([]*tenant, n)
	for i := range members {
		members[i] = w.join(fmt.Sprintf("tenant-%d", i))
	}
	var granted sync.Map
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			c := claimant(fmt.Sprintf("ns-%d/web", i), types.UID(fmt.Sprintf("uid-%d", i)), t0)
			if _, ok := m.Reserve("h", c, fmt.Sprintf("ns-%d/res", i)); ok {
				granted.Store(i, true)
			}
		})
	}
	wg.Wait()
	count := 0
	granted.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Errorf("%d reservations granted, want 1", count)
	}
}

// TestTheSetsHandlerOutlivesItsMembers: the registry watches the shared informer itself, from the first Join until
// the Service closes, so members that come and go never move or re-add it (a stopped informer refuses a handler, and
// the manager clears a stopped controller's own handlers).
func TestTheSetsHandlerOutlivesItsMembers(t *testing.T) {
	first, second := claimant("ns-a/web", "uid-1", t0), claimant("ns-b/web", "uid-2", t0.Add(time.Hour))
	w := newWorld(t, published("ns-a", "res-a", "h", first))
	a := w.join("tenant-a")
	b := w.join("tenant-b")
	if added, removed := w.informer.counts(); added != 1 || removed != 0 {
		t.Fatalf("%d handlers added, %d removed; want one handler for the registry", added, removed)
	}
	a.Leave()
	if added, removed := w.informer.counts(); added != 1 || removed != 0 {
		t.Fatalf("after a member left: %d handlers added, %d removed; want the one handler kept", added, removed)
	}
	// The handler still sees deletions.
	if _, ok := b.Reserve("h", second, "ns-b/res-b"); ok {
		t.Fatal("the first's object was forgotten when its member left")
	}
	if err := w.kube.CoreV1().ConfigMaps("ns-a").Delete(w.ctx, "res-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s", key)
	}
	b.Leave()
	// b may have been woken by the registry's first sync rather than by the delete, before the store dropped it.
	err := wait.PollUntilContextTimeout(w.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, exists, err := w.informer.GetStore().GetByKey("ns-a/res-a")
		return !exists, err
	})
	if err != nil {
		t.Fatalf("the informer never dropped the deleted object: %v", err)
	}
	c := w.join("tenant-c")
	if _, ok := c.Reserve("h", second, "ns-b/res-b"); !ok {
		t.Fatal("a member joining a registry without members was refused a free name")
	}
	if added, removed := w.informer.counts(); added != 1 || removed != 0 {
		t.Fatalf("after the members changed: %d handlers added, %d removed; want the one handler kept", added, removed)
	}
	if err := w.set.Close(); err != nil {
		t.Fatal(err)
	}
	if added, removed := w.informer.counts(); added != 1 || removed != 1 {
		t.Errorf("after the Service closed: %d handlers added, %d removed; want none left", added, removed)
	}
	if _, err := w.set.Join(kind, "tenant-d", func(string) {}); err == nil {
		t.Error("a closed Service accepted a member")
	}
}

func TestATenantJoinsOnce(t *testing.T) {
	w := newWorld(t)
	w.join("tenant-a")
	if _, err := w.set.Join(kind, "tenant-a", func(string) {}); err == nil {
		t.Error("a second membership of one tenant was accepted")
	}
}

type runtimeObject = runtime.Object

// countingInformer counts the handlers added and removed.
type countingInformer struct {
	cache.SharedIndexInformer
	mu             sync.Mutex
	added, removed int
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.mu.Lock()
	c.added++
	c.mu.Unlock()
	return c.SharedIndexInformer.AddEventHandler(h)
}

func (c *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	c.mu.Lock()
	c.removed++
	c.mu.Unlock()
	return c.SharedIndexInformer.RemoveEventHandler(r)
}

func (c *countingInformer) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.added, c.removed
}

// TestAnIncumbentsObjectIsNamedToAnEarlierClaimant: the object of a later claimant that still claims the name makes
// it the holder, so the earlier claimant's Reserve names it; once that claimant no longer claims the name, the
// earlier one holds it and waits for the object, naming its Ingress until it is gone.
func TestAnIncumbentsObjectIsNamedToAnEarlierClaimant(t *testing.T) {
	first, second := claimant("ns-a/web", "uid-1", t0), claimant("ns-b/web", "uid-2", t0.Add(time.Hour))
	w := newWorld(t, published("ns-b", "res-b", "h", second))
	a, b := w.join("tenant-a"), w.join("tenant-b")
	a.Claim(first, []string{"h"})
	b.Claim(second, []string{"h"})
	if holder, isSelf := a.Holder("h", first); isSelf || holder.UID != second.UID {
		t.Fatalf("holder = %s (self %v), want the claimant whose object publishes the name", holder.Key, isSelf)
	}
	if holder, ok := a.Reserve("h", first, "ns-a/res-a"); ok || holder != "Ingress ns-b/web" {
		t.Fatalf("Reserve = %q, %v; want a refusal naming the holder", holder, ok)
	}
	b.Claim(second, nil)
	if _, isSelf := a.Holder("h", first); !isSelf {
		t.Fatal("the earlier claimant does not hold a name nobody else claims")
	}
	if holder, ok := a.Reserve("h", first, "ns-a/res-a"); ok || holder != "Ingress ns-b/web" {
		t.Fatalf("Reserve = %q, %v; want a refusal naming the object's Ingress", holder, ok)
	}
}
