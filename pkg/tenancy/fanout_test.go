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

package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// teamLabel files a ConfigMap (standing in for a Rancher Project or a PangolinTunnel) under one key, so that an
// update can move it from one key to another.
const teamLabel = "team"

func teamKeys(obj any) []string {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Labels[teamLabel] == "" {
		return nil
	}
	return []string{cm.Labels[teamLabel]}
}

// fanoutFixture is a Fanout over a real ConfigMap informer fed by a fake clientset, with one Interest per tenant.
type fanoutFixture struct {
	t        *testing.T
	client   *fake.Clientset
	informer *countingInformer
	fanout   *tenancy.Fanout
	sentinel int
}

func newFanoutFixture(t *testing.T) *fanoutFixture {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &fanoutFixture{t: t, client: client, informer: &countingInformer{SharedIndexInformer: factory.Core().V1().ConfigMaps().Informer()}}
	fanout, err := tenancy.NewFanout(f.informer, teamKeys)
	if err != nil {
		t.Fatal(err)
	}
	f.fanout = fanout
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	waitFor(t, "informer to sync", f.informer.HasSynced)
	return f
}

// fanoutRecorder records what one tenant's handler is told, as "add name", "update name", "delete name".
type fanoutRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fanoutRecorder) add(kind string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		kind, obj = kind+"-tombstone", t.Obj
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, kind+" "+obj.(*corev1.ConfigMap).Name)
}

func (r *fanoutRecorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.add("add", obj) },
		UpdateFunc: func(_, obj any) { r.add("update", obj) },
		DeleteFunc: func(obj any) { r.add("delete", obj) },
	}
}

// take returns the recorded events without the sentinels, and forgets them.
func (r *fanoutRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.DeleteFunc(r.events, func(e string) bool {
		_, name, _ := strings.Cut(e, " ")
		return isSentinel(name)
	})
	r.events = nil
	return out
}

func (r *fanoutRecorder) saw(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.events, event)
}

// interest registers rec on a new Interest that holds keys, and waits until its registration has synced.
func (f *fanoutFixture) interest(rec *fanoutRecorder, keys ...string) *tenancy.Interest {
	f.t.Helper()
	in, err := f.fanout.Interest()
	if err != nil {
		f.t.Fatal(err)
	}
	in.Add(keys...)
	reg, err := in.AddEventHandler(rec.handler())
	if err != nil {
		f.t.Fatal(err)
	}
	waitClosed(f.t, "interest to sync", reg.HasSyncedChecker().Done())
	return in
}

func (f *fanoutFixture) configMap(name, team string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: name, Labels: map[string]string{teamLabel: team}}}
}

func (f *fanoutFixture) create(name, team string) {
	f.t.Helper()
	if _, err := f.client.CoreV1().ConfigMaps("shared").Create(context.Background(), f.configMap(name, team), metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fanoutFixture) update(name, team string) {
	f.t.Helper()
	if _, err := f.client.CoreV1().ConfigMaps("shared").Update(context.Background(), f.configMap(name, team), metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fanoutFixture) delete(name string) {
	f.t.Helper()
	if err := f.client.CoreV1().ConfigMaps("shared").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// barrier creates a sentinel under each team and waits until its recorder has it. The informer delivers in order,
// so every earlier event has been delivered by then.
func (f *fanoutFixture) barrier(recorders map[string]*fanoutRecorder) {
	f.t.Helper()
	for team, rec := range recorders {
		f.sentinel++
		name := fmt.Sprintf("%s%d", sentinelPrefix, f.sentinel)
		f.create(name, team)
		waitFor(f.t, "sentinel "+name, func() bool { return rec.saw("add " + name) })
	}
}

// TestFanoutDeliversOnlyToTheInterestedTenants: one handler on the shared informer whatever the number of tenants;
// an event reaches exactly the tenants whose Interest holds one of its keys, an update moving an object between keys
// reaches both sides, and a tombstone is passed on intact.
func TestFanoutDeliversOnlyToTheInterestedTenants(t *testing.T) {
	f := newFanoutFixture(t)
	recorders := map[string]*fanoutRecorder{}
	interests := map[string]*tenancy.Interest{}
	for i := range 50 {
		team := fmt.Sprintf("team-%d", i)
		recorders[team] = &fanoutRecorder{}
		interests[team] = f.interest(recorders[team], team)
		if i == 0 {
			if got := f.informer.handlers(); got != 1 {
				t.Fatalf("1 tenant: %d handlers on the shared informer, want 1", got)
			}
		}
	}
	if got := f.informer.handlers(); got != 1 {
		t.Fatalf("50 tenants: %d handlers on the shared informer, want 1 (as with 1 tenant)", got)
	}
	if got := f.fanout.RegistrationCount(); got != 50 {
		t.Fatalf("RegistrationCount = %d, want 50", got)
	}
	// team-0 also wants team-9's objects.
	interests["team-0"].Add("team-9")

	f.create("a", "team-3")
	f.create("b", "team-9")
	f.update("a", "team-4")
	f.create("nobody", "team-x")
	f.delete("a")
	f.barrier(recorders)

	want := map[string][]string{
		"team-0": {"add b"},
		"team-3": {"add a", "update a"},
		"team-4": {"update a", "delete a"},
		"team-9": {"add b"},
	}
	for team, rec := range recorders {
		if got := rec.take(); !slices.Equal(got, want[team]) {
			t.Errorf("%s was told %q, want %q", team, got, want[team])
		}
	}

	// A tombstone finds its interested tenants by its last known state and reaches them intact.
	tenancy.FanoutHandlerOf(f.fanout).OnDelete(cache.DeletedFinalStateUnknown{Key: "shared/b", Obj: f.configMap("b", "team-9")})
	for team, rec := range recorders {
		var want []string
		if team == "team-0" || team == "team-9" {
			want = []string{"delete-tombstone b"}
		}
		if got := rec.take(); !slices.Equal(got, want) {
			t.Errorf("tombstone: %s was told %q, want %q", team, got, want)
		}
	}
}

// TestStoppedInterestGetsNothingAndLeavesNothing: a closed Interest, or a key removed, hears nothing more, and
// leaves no registration or key behind; closing the Fanout removes its one handler.
func TestStoppedInterestGetsNothingAndLeavesNothing(t *testing.T) {
	f := newFanoutFixture(t)
	stopped, removed, running := &fanoutRecorder{}, &fanoutRecorder{}, &fanoutRecorder{}
	stoppedIn := f.interest(stopped, "team-s")
	removedIn := f.interest(removed, "team-r", "team-kept")
	f.interest(running, "team-run")

	stoppedIn.Close()
	stoppedIn.Close() // idempotent
	removedIn.Remove("team-r")
	f.create("s", "team-s")
	f.create("r", "team-r")
	f.barrier(map[string]*fanoutRecorder{"team-run": running, "team-kept": removed})
	if got := stopped.take(); len(got) != 0 {
		t.Errorf("a closed Interest was told %q", got)
	}
	if got := removed.take(); len(got) != 0 {
		t.Errorf("an Interest was told %q about a key it removed", got)
	}
	if got := f.fanout.RegistrationCount(); got != 2 {
		t.Errorf("RegistrationCount = %d after one of three closed, want 2", got)
	}
	if got := f.fanout.KeyCount(); got != 2 {
		t.Errorf("KeyCount = %d, want 2 (team-kept, team-run)", got)
	}
	if _, err := stoppedIn.AddEventHandler(stopped.handler()); err == nil {
		t.Error("a closed Interest took a handler")
	}
	if err := f.fanout.Close(); err != nil {
		t.Fatal(err)
	}
	if got, keys := f.fanout.RegistrationCount(), f.fanout.KeyCount(); got != 0 || keys != 0 {
		t.Errorf("after Close: %d registrations, %d keys", got, keys)
	}
	if got := f.informer.handlers(); got != 0 {
		t.Errorf("after Close: %d handlers on the shared informer", got)
	}
}

// TestStandaloneInterestRemovesItsFanout: NewInterest, for a reader alone on a plain informer, removes its handler
// when closed.
func TestStandaloneInterestRemovesItsFanout(t *testing.T) {
	f := newFanoutFixture(t)
	rec := &fanoutRecorder{}
	in, err := tenancy.NewInterest(f.informer, teamKeys)
	if err != nil {
		t.Fatal(err)
	}
	in.Add("team-a")
	if _, err := in.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	f.create("a", "team-a")
	waitFor(t, "the Interest's event", func() bool { return rec.saw("add a") })
	in.Close()
	if got := f.informer.handlers(); got != 1 { // the fixture's own Fanout
		t.Errorf("%d handlers on the informer after the standalone Interest closed, want 1", got)
	}
}

// TestFanoutRefusesWhatWouldReachEveryTenant: a handler of its own would get every event; reconfiguring the
// informer would change it for every tenant.
func TestFanoutRefusesWhatWouldReachEveryTenant(t *testing.T) {
	f := newFanoutFixture(t)
	if _, err := f.fanout.AddEventHandler(cache.ResourceEventHandlerFuncs{}); !errors.Is(err, tenancy.ErrUseInterest) {
		t.Errorf("AddEventHandler: %v, want ErrUseInterest", err)
	}
	in, err := f.fanout.Interest()
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Fanout.SetTransform":   f.fanout.SetTransform(nil),
		"Fanout.AddIndexers":    f.fanout.AddIndexers(nil),
		"Interest.SetTransform": in.SetTransform(nil),
		"Interest.AddIndexers":  in.AddIndexers(nil),
	} {
		if !errors.Is(err, tenancy.ErrNotSupportedOnView) {
			t.Errorf("%s: %v, want ErrNotSupportedOnView", name, err)
		}
	}
	if got := f.informer.handlers(); got != 1 {
		t.Errorf("%d handlers on the informer, want the Fanout's 1", got)
	}
	if in.GetIndexer() != f.informer.GetIndexer() {
		t.Error("an Interest does not read the shared indexer")
	}
}

// TestInterestHandlersMayCallBack: a handler may change its Interest's keys, remove a handler and close its
// Interest from inside a delivery, without deadlock; a handler removed during a delivery is not called by it.
func TestInterestHandlersMayCallBack(t *testing.T) {
	f := newFanoutFixture(t)
	in, err := f.fanout.Interest()
	if err != nil {
		t.Fatal(err)
	}
	in.Add("team-a")
	var second cache.ResourceEventHandlerRegistration
	done := make(chan struct{})
	if _, err := in.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		in.Add("team-b")
		in.Remove("team-a")
		if err := in.RemoveEventHandler(second); err != nil {
			t.Error(err)
		}
		in.Close()
		close(done)
	}}); err != nil {
		t.Fatal(err)
	}
	removed := &fanoutRecorder{}
	if second, err = in.AddEventHandler(removed.handler()); err != nil {
		t.Fatal(err)
	}
	f.create("a", "team-a")
	waitClosed(t, "the handler's call", done)
	if got, keys := f.fanout.RegistrationCount(), f.fanout.KeyCount(); got != 0 || keys != 0 {
		t.Errorf("after the handler closed its Interest: %d registrations, %d keys", got, keys)
	}
	// The informer calls the Fanout's handler one event at a time: once a later event is delivered, the first
	// delivery has returned.
	later := &fanoutRecorder{}
	f.interest(later, "team-later")
	f.create("later", "team-later")
	waitFor(t, "a later event", func() bool { return later.saw("add later") })
	if got := removed.take(); len(got) != 0 {
		t.Errorf("a handler removed during the delivery was told %q", got)
	}
}
