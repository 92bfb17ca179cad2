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
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

const recordsNamespace = "kube-system"

// cluster is one fake API server that several processes share. Its Leases get resourceVersions and honour them on
// update and delete, as the API server does (the fake tracker alone does not), so a compare-and-swap that lost
// fails with a conflict.
type cluster struct {
	t    *testing.T
	kube *kubefake.Clientset
	// alive says which claimants (by UID) a live read finds, with the names they claim.
	mu    sync.Mutex
	alive map[types.UID][]string
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, kube: kubefake.NewClientset(), alive: map[types.UID][]string{}}
	var rv int64
	leases := coordinationv1.SchemeGroupVersion.WithResource("leases")
	current := func(ns, name string) (*coordinationv1.Lease, error) {
		obj, err := c.kube.Tracker().Get(leases, ns, name)
		if err != nil {
			return nil, err
		}
		return obj.(*coordinationv1.Lease), nil
	}
	// The fake clientset runs its reactors under one lock, so each check-and-write is atomic.
	c.kube.PrependReactor("create", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		rv++
		lease.ResourceVersion, lease.UID = strconv.FormatInt(rv, 10), types.UID(fmt.Sprintf("lease-%d", rv))
		return false, nil, nil
	})
	c.kube.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		cur, err := current(lease.Namespace, lease.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.ResourceVersion != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(leases.GroupResource(), lease.Name, fmt.Errorf("resourceVersion %s, stored %s", lease.ResourceVersion, cur.ResourceVersion))
		}
		rv++
		lease.ResourceVersion = strconv.FormatInt(rv, 10)
		return false, nil, nil
	})
	c.kube.PrependReactor("delete", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteActionImpl)
		cur, err := current(del.Namespace, del.Name)
		if err != nil {
			return true, nil, err
		}
		if p := del.DeleteOptions.Preconditions; p != nil && ((p.ResourceVersion != nil && *p.ResourceVersion != cur.ResourceVersion) || (p.UID != nil && *p.UID != cur.UID)) {
			return true, nil, apierrors.NewConflict(leases.GroupResource(), del.Name, fmt.Errorf("precondition failed"))
		}
		return false, nil, nil
	})
	return c
}

func (c *cluster) setAlive(uid types.UID, names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alive[uid] = names
}

func (c *cluster) live(_ context.Context, _, _ string, uid types.UID) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.alive[uid], nil
}

// object reads a ConfigMap live: it publishes name while it exists and says so.
func (c *cluster) object(ctx context.Context, key, name string) (bool, error) {
	namespace, n, _ := cache.SplitMetaNamespaceKey(key)
	cm, err := c.kube.CoreV1().ConfigMaps(namespace).Get(ctx, n, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && cm.Data["name"] == name, err
}

// publishers lists the ConfigMaps of every namespace live: those that publish name.
func (c *cluster) publishers(ctx context.Context, name string) (map[string]Holding, error) {
	list, err := c.kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	found := map[string]Holding{}
	for i := range list.Items {
		if h, ok := configMapHolding(&list.Items[i]); ok && h.Names[0] == name {
			found[list.Items[i].Namespace+"/"+list.Items[i].Name] = h
		}
	}
	return found, nil
}

func (c *cluster) record(name string) (*record, bool) {
	c.t.Helper()
	lease, err := c.kube.CoordinationV1().Leases(recordsNamespace).Get(context.Background(), RecordName("Ingress", name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		c.t.Fatal(err)
	}
	rec, ok := decodeRecord(lease)
	if !ok {
		c.t.Fatalf("Lease %s is no claim record", lease.Name)
	}
	return rec, true
}

// process is one replica of the manager: its own informers (so its own Registry) over the shared cluster.
type process struct {
	c       *cluster
	ctx     context.Context
	holds   cache.SharedIndexInformer
	records cache.SharedIndexInformer
	set     *Service
}

func (c *cluster) process() *process { return c.processSeeing() }

// processSeeing is a process whose holdings informer reads only namespaces (every one if none), as a shard's with
// --sharded-watch reads only its tenants'.
func (c *cluster) processSeeing(namespaces ...string) *process {
	ctx, cancel := context.WithCancel(context.Background())
	var options []kubeinformers.SharedInformerOption
	if len(namespaces) > 0 {
		options = append(options, kubeinformers.WithNamespace(namespaces[0]))
	}
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, options...)
	leases := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, kubeinformers.WithNamespace(recordsNamespace))
	p := &process{c: c, ctx: ctx, holds: factory.Core().V1().ConfigMaps().Informer(), records: leases.Coordination().V1().Leases().Informer()}
	p.set = NewService(ServiceConfig{
		Informers: func(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
			return p.holds, gvr == configMaps
		},
		Records: &RecordsConfig{Client: c.kube, Namespace: recordsNamespace, Informer: p.records,
			PartialHoldings: func() bool { return len(namespaces) > 0 }},
	})
	factory.Start(ctx.Done())
	leases.Start(ctx.Done())
	c.t.Cleanup(func() {
		if err := p.set.Close(); err != nil {
			c.t.Error(err)
		}
		cancel()
		factory.Shutdown()
		leases.Shutdown()
	})
	return p
}

func (p *process) join(tenantName string) *tenant {
	t := p.c.t
	t.Helper()
	queued := make(chan string, 100)
	k := kind
	k.Live, k.Object, k.Publishers = p.c.live, p.c.object, p.c.publishers
	// A full queue drops keys: the race below makes more events than any test reads.
	m, err := p.set.Join(k, tenantName, func(key string) {
		select {
		case queued <- key:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Leave)
	if !cache.WaitForCacheSync(p.ctx.Done(), m.HasSynced) {
		t.Fatal("the registry never synced")
	}
	return &tenant{Member: m, queued: queued}
}

func decide(t *testing.T, tn *tenant, name string, self Claimant) (Claimant, bool) {
	t.Helper()
	holder, isSelf, err := tn.Decide(context.Background(), name, self)
	if err != nil {
		t.Fatalf("Decide(%s, %s): %v", name, self.Key, err)
	}
	return holder, isSelf
}

// waitDecided waits until tn's cache shows what the API server decided: Decide then needs no write.
func waitDecided(t *testing.T, tn *tenant, name string, self Claimant, wantSelf bool) Claimant {
	t.Helper()
	var holder Claimant
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		h, isSelf, err := tn.Decide(ctx, name, self)
		holder = h
		return err == nil && isSelf == wantSelf, nil
	})
	if err != nil {
		t.Fatalf("%s never decided self=%v for %s (holder %+v)", self.Key, wantSelf, name, holder)
	}
	return holder
}

// TestAnEarlierClaimInAnotherProcessTakesTheName: two processes (two Registries) over one API server. The later
// claimant records the name first; the earlier one, in the other process, takes the record over, and the later
// one's process, woken by the record's change, then finds the name held by the earlier one.
func TestAnEarlierClaimInAnotherProcessTakesTheName(t *testing.T) {
	c := newCluster(t)
	a, b := c.process().join("tenant-a"), c.process().join("tenant-b")
	early := claimant("ns-a/web", "uid-a", t0)
	late := claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(early.UID, "h")
	c.setAlive(late.UID, "h")
	a.Claim(early, []string{"h"})
	b.Claim(late, []string{"h"})

	if _, isSelf := decide(t, b, "h", late); !isSelf {
		t.Fatal("the only recorded claimant does not hold the name")
	}
	if rec, ok := c.record("h"); !ok || rec.holder.UID != late.UID || rec.holder.tenant != "tenant-b" {
		t.Fatalf("record = %+v, want the later claimant's", rec)
	}
	for len(b.queued) > 0 {
		<-b.queued
	}
	if _, isSelf := decide(t, a, "h", early); !isSelf {
		t.Fatal("the earlier claimant did not take the name")
	}
	if rec, _ := c.record("h"); rec.holder.UID != early.UID {
		t.Fatalf("record names %s, want the earlier claimant", rec.holder.UID)
	}
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s in the later claimant's process", key)
	}
	holder := waitDecided(t, b, "h", late, false)
	if b.Describe(holder) != "Ingress ns-a/web" {
		t.Errorf("holder = %s, want Ingress ns-a/web", b.Describe(holder))
	}
	// Its Acquire refuses too, naming the holder.
	if who, ok, err := b.Acquire(context.Background(), "h", late, "ns-b/cm"); ok || err != nil || who != "Ingress ns-a/web" {
		t.Errorf("Acquire by the later claimant = %q, %v, %v; want refused for Ingress ns-a/web", who, ok, err)
	}
}

// TestTheRecordedHolderIsNamedOverALaterLocalOne: a claimant that comes after another claimant of its own process
// is told the holder the record names when that one is earlier still (it is in another process); a new name, so a
// new Event, once the record changes hands.
func TestTheRecordedHolderIsNamedOverALaterLocalOne(t *testing.T) {
	c := newCluster(t)
	p1 := c.process()
	a, b := p1.join("tenant-a"), p1.join("tenant-b")
	e := c.process().join("tenant-e")
	earliest := claimant("ns-e/web", "uid-e", t0)
	middle := claimant("ns-a/web", "uid-a", t0.Add(time.Second))
	latest := claimant("ns-b/web", "uid-b", t0.Add(2*time.Second))
	for _, cl := range []Claimant{earliest, middle, latest} {
		c.setAlive(cl.UID, "h")
	}
	a.Claim(middle, []string{"h"})
	b.Claim(latest, []string{"h"})
	e.Claim(earliest, []string{"h"})

	decide(t, a, "h", middle)
	if holder, isSelf := decide(t, b, "h", latest); isSelf || holder.UID != middle.UID {
		t.Fatalf("holder = %+v, want the earlier claimant of the process", holder)
	}
	waitDecided(t, e, "h", earliest, true)
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		holder, _ := decide(t, b, "h", latest)
		return holder.UID == earliest.UID, nil
	})
	if err != nil {
		t.Fatal("the latest claimant is never told the recorded holder, which comes first")
	}
}

// TestAGoneHoldersRecordIsTakenOver: a record whose holder a live read no longer finds (its object is gone, or its
// tenant no longer runs the controller) is taken over by a later claimant; a live one is not.
func TestAGoneHoldersRecordIsTakenOver(t *testing.T) {
	c := newCluster(t)
	gone := claimant("ns-x/old", "uid-x", t0)
	holderProc := c.process().join("tenant-x")
	if _, isSelf := decide(t, holderProc, "h", gone); !isSelf {
		t.Fatal("no record made")
	}
	holderProc.Leave() // its process stops: the record stays
	if _, ok := c.record("h"); !ok {
		t.Fatal("a tenant that stopped released its record")
	}

	b := c.process().join("tenant-b")
	late := claimant("ns-b/web", "uid-b", t0.Add(time.Hour))
	b.Claim(late, []string{"h"})
	c.setAlive(gone.UID, "h")
	if holder, isSelf := decide(t, b, "h", late); isSelf || holder.UID != gone.UID {
		t.Fatalf("a later claimant took the name from a live holder (holder %+v)", holder)
	}
	c.setAlive(gone.UID) // its Ingress dropped the host, or was deleted
	if _, isSelf := decide(t, b, "h", late); !isSelf {
		t.Fatal("the record of a holder that no longer claims was not taken over")
	}
	if rec, _ := c.record("h"); rec.holder.UID != late.UID {
		t.Errorf("record names %s, want %s", rec.holder.UID, late.UID)
	}
}

// TestARecordIsReleasedWhenItsClaimantLetsGo: the process deletes the record of a name its claimant no longer
// claims, so claimants in other processes are woken by the deletion.
func TestARecordIsReleasedWhenItsClaimantLetsGo(t *testing.T) {
	c := newCluster(t)
	a := c.process().join("tenant-a")
	b := c.process().join("tenant-b")
	first, second := claimant("ns-a/web", "uid-a", t0), claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(first.UID, "h")
	a.Claim(first, []string{"h"})
	b.Claim(second, []string{"h"})
	decide(t, a, "h", first)
	waitDecided(t, b, "h", second, false)
	for len(b.queued) > 0 {
		<-b.queued
	}

	a.Claim(first, nil)
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s", key)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok := c.record("h")
		return !ok, nil
	})
	if err != nil {
		t.Fatal("the record of a released name is still there")
	}
	waitDecided(t, b, "h", second, true)
}

// TestARecordIsHeldUntilItsObjectIsGone: a claimant that lets go of a name whose object still exists (a finalizer
// holds it) keeps its record until the object is gone, so the next claimant, whose holdings informer does not see
// that object (another shard's namespace, with --sharded-watch), takes the record over and publishes only once the
// object is gone, instead of recording the name afresh beside it.
func TestARecordIsHeldUntilItsObjectIsGone(t *testing.T) {
	c := newCluster(t)
	a, b := c.processSeeing("ns-a").join("tenant-a"), c.processSeeing("ns-b").join("tenant-b")
	first, second := claimant("ns-a/web", "uid-a", t0), claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(first.UID, "h")
	c.setAlive(second.UID, "h")
	a.Claim(first, []string{"h"})
	ctx := context.Background()
	waitDecided(t, a, "h", first, true)
	if _, ok, err := a.Acquire(ctx, "h", first, "ns-a/first"); !ok || err != nil {
		t.Fatalf("the first claimant could not acquire: %v", err)
	}
	if _, err := c.kube.CoreV1().ConfigMaps("ns-a").Create(ctx, published("ns-a", "first", "h", first), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Created("h", "ns-a/first", true)

	// The first claimant lets go; its object stays (a finalizer). The release, however often it runs, keeps the
	// record.
	c.setAlive(first.UID)
	a.Claim(first, nil)
	if err := a.r.release(ctx, "h"); err == nil {
		t.Error("the release of a record whose object still publishes the name succeeded")
	}
	if rec, ok := c.record("h"); !ok || rec.holder.UID != first.UID {
		t.Fatalf("the record of a name whose object still exists went (%v) or changed hands", ok)
	}
	b.Claim(second, []string{"h"})
	waitDecided(t, b, "h", second, true)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r, ok := b.r.cachedRecord("h")
		return ok && r.holder.UID == second.UID, nil
	})
	if err != nil {
		t.Fatal("the next claimant's cache never showed its record")
	}
	if who, ok, err := b.Acquire(ctx, "h", second, "ns-b/second"); ok {
		t.Fatalf("the next claimant acquired while ns-a/first still publishes the name (%q, %v): two publishers", who, err)
	} else if !errors.Is(err, worker.ErrWaiting) {
		// No informer of b's process reads ns-a: nothing would wake it when the object goes.
		t.Errorf("Acquire while another shard's object publishes the name = %q, %v; want a wait retried with backoff", who, err)
	}

	if err := c.kube.CoreV1().ConfigMaps("ns-a").Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ok, err := b.Acquire(ctx, "h", second, "ns-b/second")
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatal("the next claimant never acquired after the object went")
	}
	b.Created("h", "ns-b/second", false)
}

// TestTheNewHolderWaitsForThePreviousHoldersObject: a holder that let go of its name had announced and created its
// object; the claimant that takes the record over, whose own cache may not show that object, creates nothing until
// a live read finds it gone, nor for the grace an announced object that was never seen is given.
func TestTheNewHolderWaitsForThePreviousHoldersObject(t *testing.T) {
	c := newCluster(t)
	a, b := c.process().join("tenant-a"), c.process().join("tenant-b")
	early := claimant("ns-a/web", "uid-a", t0)
	late := claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(early.UID, "h")
	c.setAlive(late.UID, "h")
	a.Claim(early, []string{"h"})
	b.Claim(late, []string{"h"})
	ctx := context.Background()

	decide(t, b, "h", late)
	waitDecided(t, b, "h", late, true)
	if _, ok, err := b.Acquire(ctx, "h", late, "ns-b/late"); !ok || err != nil {
		t.Fatalf("the holder could not acquire: %v", err)
	}
	if _, err := c.kube.CoreV1().ConfigMaps("ns-b").Create(ctx, published("ns-b", "late", "h", late), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Created("h", "ns-b/late", true)

	// It publishes the name: the earlier claimant does not take it.
	if holder := waitDecided(t, a, "h", early, false); holder.UID != late.UID {
		t.Fatalf("the earlier claimant is told %s holds the name, want the publisher", holder.Key)
	}
	// The later claimant's Ingress drops the name, its object not yet deleted. The earlier claimant's cache may
	// still show the record as it was before the announcement: the takeover then conflicts, and the retry succeeds.
	c.setAlive(late.UID)
	waitDecided(t, a, "h", early, true)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r, ok := a.r.cachedRecord("h")
		return ok && r.holder.UID == early.UID, nil
	})
	if err != nil {
		t.Fatal("the new holder's cache never showed its record")
	}
	if who, ok, err := a.Acquire(ctx, "h", early, "ns-a/early"); ok || err != nil || who == "" {
		t.Fatalf("Acquire while the previous holder's object exists = %q, %v, %v; want refused", who, ok, err)
	}
	if err := c.kube.CoreV1().ConfigMaps("ns-b").Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Seen and then gone: no grace. (The holdings informer may still show it for a moment.)
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ok, err := a.Acquire(ctx, "h", early, "ns-a/early")
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatal("the new holder never acquired after the previous holder's object went")
	}
	a.Created("h", "ns-a/early", false)

	// An announced object never seen is waited for until the grace ends.
	rec, _ := c.record("h")
	lease := rec.lease.DeepCopy()
	lease.Annotations[annotationPrevious] = previousEntry("ns-b/in-flight", time.Now())
	if _, err := c.kube.CoordinationV1().Leases(recordsNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r, ok := a.r.cachedRecord("h")
		return ok && len(r.previous) == 1, nil
	})
	if err != nil {
		t.Fatal("the cache never showed the announced object")
	}
	if _, ok, err := a.Acquire(ctx, "h", early, "ns-a/early"); ok || err == nil {
		t.Errorf("Acquire within the grace of an announced object = %v, %v; want an error to retry", ok, err)
	}
}

// TestProcessesRacingForNamesPublishOnce: two processes, each with a claimant of every name, race as their
// controllers would (decide; acquire and create the object if holding; delete it if not), over twenty names at
// once. Claimants are made in the same second, so the smaller UID is the earlier one, and it is sometimes in one
// process, sometimes in the other: the earlier takes the record from the later until the later announced its
// object, then the publisher keeps it. A watch fails the test if two objects ever publish one name, and in the end
// each name is published by one claimant, the one its record names.
func TestProcessesRacingForNamesPublishOnce(t *testing.T) {
	grace := announceGrace
	announceGrace = 200 * time.Millisecond
	t.Cleanup(func() { announceGrace = grace })
	c := newCluster(t)
	procs := []*tenant{c.process().join("tenant-a"), c.process().join("tenant-b")}
	const names = 20
	claimants := map[string][2]Claimant{}
	for i := range names {
		name := fmt.Sprintf("h%d", i)
		// Even names: tenant-a's claimant is earlier; odd: tenant-b's.
		ua, ub := "uid-1", "uid-2"
		if i%2 == 1 {
			ua, ub = ub, ua
		}
		cs := [2]Claimant{claimant("ns-a/"+name, types.UID(ua+name), t0), claimant("ns-b/"+name, types.UID(ub+name), t0)}
		claimants[name] = cs
		for j, p := range procs {
			c.setAlive(cs[j].UID, name)
			p.Claim(cs[j], []string{name})
		}
	}
	counter := watchPublishers(t, c)

	ctx := context.Background()
	// step is one sync of self's controller; it says whether self's outcome is stable (publishing while it holds
	// the name, nothing while it does not): the test's stand-in for the events that would bring the controller back.
	step := func(p *tenant, self Claimant, name string) (bool, error) {
		namespace, obj := self.Key[:4], name
		_, isSelf, err := p.Decide(ctx, name, self)
		if err != nil {
			return false, nil
		}
		if !isSelf {
			err := c.kube.CoreV1().ConfigMaps(namespace).Delete(ctx, obj, metav1.DeleteOptions{})
			return err == nil || apierrors.IsNotFound(err), nil
		}
		if _, err := c.kube.CoreV1().ConfigMaps(namespace).Get(ctx, obj, metav1.GetOptions{}); err == nil {
			return true, nil
		}
		_, ok, err := p.Acquire(ctx, name, self, namespace+"/"+obj)
		if !ok || err != nil {
			return false, nil
		}
		_, err = c.kube.CoreV1().ConfigMaps(namespace).Create(ctx, published(namespace, obj, name, self), metav1.CreateOptions{})
		p.Created(name, namespace+"/"+obj, err == nil)
		return err == nil, nil
	}
	var wg sync.WaitGroup
	for name, cs := range claimants {
		for j, p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
					return step(p, cs[j], name)
				})
			}()
		}
	}
	wg.Wait()
	for name, cs := range claimants {
		var publishers []Claimant
		for _, cl := range cs {
			if _, err := c.kube.CoreV1().ConfigMaps(cl.Key[:4]).Get(ctx, name, metav1.GetOptions{}); err == nil {
				publishers = append(publishers, cl)
			}
		}
		if len(publishers) != 1 {
			t.Errorf("%s: published by %d claimants, want 1", name, len(publishers))
			continue
		}
		if rec, ok := c.record(name); !ok || rec.holder.UID != publishers[0].UID {
			t.Errorf("%s: record %+v, want held by its publisher %s", name, rec, publishers[0].Key)
		}
	}
	if most := counter.stop(); most > 1 {
		t.Errorf("%d objects published one name at once", most)
	}
}

// publisherCount follows every ConfigMap through one watch and remembers the most that published one name at once.
type publisherCount struct {
	stopWatch func()
	done      chan struct{}
	mu        sync.Mutex
	most      int
}

func watchPublishers(t *testing.T, c *cluster) *publisherCount {
	w, err := c.kube.CoreV1().ConfigMaps("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &publisherCount{stopWatch: w.Stop, done: make(chan struct{})}
	live := map[string]map[string]bool{}
	go func() {
		defer close(p.done)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			name := cm.Data["name"]
			if live[name] == nil {
				live[name] = map[string]bool{}
			}
			if ev.Type == "DELETED" {
				delete(live[name], cm.Namespace+"/"+cm.Name)
				continue
			}
			live[name][cm.Namespace+"/"+cm.Name] = true
			p.mu.Lock()
			p.most = max(p.most, len(live[name]))
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *publisherCount) stop() int {
	p.stopWatch()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.most
}

// TestAnswerCallsNoAPIAndSettleWrites: Answer, which a controller's plan reads, makes no API call whatever the
// record says; Settle makes the record's writes and live reads. A new name is answered Self but not settled until
// the record is created; an earlier recorded holder of another process is answered as holder until Settle reads it
// live, finds it gone and takes the record over.
func TestAnswerCallsNoAPIAndSettleWrites(t *testing.T) {
	c := newCluster(t)
	a, b := c.process().join("tenant-a"), c.process().join("tenant-b")
	early := claimant("ns-a/web", "uid-a", t0)
	late := claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(early.UID, "h")
	a.Claim(early, []string{"h"})
	b.Claim(late, []string{"h"})
	ctx := context.Background()

	calls := len(c.kube.Actions())
	answer, err := a.Answer("h", early)
	if err != nil {
		t.Fatal(err)
	}
	if !answer.IsSelf || answer.Settled() {
		t.Fatalf("Answer for a name without a record = self %t, settled %t; want self, not settled", answer.IsSelf, answer.Settled())
	}
	if n := len(c.kube.Actions()); n != calls {
		t.Fatalf("Answer made %d API calls", n-calls)
	}
	if answer, err = a.Settle(ctx, answer); err != nil || !answer.IsSelf || !answer.Settled() {
		t.Fatalf("Settle = self %t, settled %t, %v; want self, settled", answer.IsSelf, answer.Settled(), err)
	}
	if rec, ok := c.record("h"); !ok || rec.holder.UID != early.UID {
		t.Fatalf("record = %+v, want the earlier claimant's", rec)
	}
	waitDecided(t, a, "h", early, true)

	// The later claimant's process sees the earlier holder in the record; it still claims: Settle confirms.
	waitDecided(t, b, "h", late, false)
	// Decide may have read the record live (its create answered AlreadyExists) before b's cache showed it.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok := b.r.cachedRecord("h")
		return ok, nil
	})
	if err != nil {
		t.Fatal("the later claimant's cache never showed the record")
	}
	calls = len(c.kube.Actions())
	if answer, err = b.Answer("h", late); err != nil || answer.IsSelf || answer.Settled() {
		t.Fatalf("Answer behind another process's holder = self %t, settled %t, %v; want not self, not settled",
			answer.IsSelf, answer.Settled(), err)
	}
	if n := len(c.kube.Actions()); n != calls {
		t.Fatalf("Answer made %d API calls", n-calls)
	}
	if answer, err = b.Settle(ctx, answer); err != nil || answer.IsSelf || b.Describe(answer.Holder) != "Ingress ns-a/web" {
		t.Fatalf("Settle behind a live holder = self %t, holder %s, %v; want Ingress ns-a/web", answer.IsSelf, b.Describe(answer.Holder), err)
	}

	// Once the holder is gone (read live), Settle takes the record over.
	c.setAlive(early.UID)
	if answer, err = b.Answer("h", late); err != nil {
		t.Fatal(err)
	}
	if answer, err = b.Settle(ctx, answer); err != nil || !answer.IsSelf {
		t.Fatalf("Settle behind a gone holder = self %t, %v; want self", answer.IsSelf, err)
	}
	if rec, _ := c.record("h"); rec.holder.UID != late.UID {
		t.Fatalf("record names %s, want the later claimant", rec.holder.UID)
	}
}

// TestAnObjectIsAnnouncedInARecordTheCacheDoesNotShowYet: right after Decide created the claim record, the records
// informer may not show it yet (here it never hears of a change). Acquire then reads the record live and announces
// the object in it before the create, so that an earlier claimant that takes the record next waits for that object
// instead of publishing the name beside it.
func TestAnObjectIsAnnouncedInARecordTheCacheDoesNotShowYet(t *testing.T) {
	c := newCluster(t)
	c.kube.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	b := c.process().join("tenant-b")
	late := claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(late.UID, "h")
	b.Claim(late, []string{"h"})
	ctx := context.Background()

	if _, isSelf := decide(t, b, "h", late); !isSelf {
		t.Fatal("the only claimant does not hold the name")
	}
	if _, cached := b.r.cachedRecord("h"); cached {
		t.Fatal("the records informer shows the record: this test needs a cache that lags")
	}
	if who, ok, err := b.Acquire(ctx, "h", late, "ns-b/late"); !ok || err != nil {
		t.Fatalf("Acquire by the holder = %q, %v, %v; want ok", who, ok, err)
	}
	rec, found := c.record("h")
	if !found || rec.holder.UID != late.UID || rec.object != "ns-b/late" {
		t.Fatalf("the record after Acquire: %+v (found %v); want it held by %s announcing ns-b/late", rec, found, late.UID)
	}
}
