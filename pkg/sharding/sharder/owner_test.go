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

package sharder

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestSharderWaitsForTheRecordedShardWhenTheLabelIsStripped: a tenant whose shard label was removed by hand (or by
// an update that replaced the object) is not unowned while the shard its status names is live: that shard may still
// be stopping it. The sharder decides on the object as stored, not on its cache (which here has seen neither the
// shard's record nor anything after it), says once that it waits, and assigns the tenant only once the shard has
// released it.
func TestSharderWaitsForTheRecordedShardWhenTheLabelIsStripped(t *testing.T) {
	w := newWorld(t, 0, 1, []string{"shard-a", "shard-b"}, []string{"shard-a", "shard-b"})
	recorder := record.NewFakeRecorder(10)
	w.sharder.cfg.Recorder = recorder
	const tenant = "tenant-0"
	pcs := w.client.MultiprojectV1alpha1().ProviderConfigs()
	pc, err := pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The sharder's cache: unlabeled, nothing recorded.
	stale := pc.DeepCopy()
	stale.Labels = nil
	if err := w.caches["sharder"].Update(stale); err != nil {
		t.Fatal(err)
	}
	// As stored: shard-a recorded itself and runs the tenant, then the label was removed.
	if pc, err = sharding.RecordOwner(w.ctx, w.client, pc, "shard-a"); err != nil {
		t.Fatal(err)
	}
	pc.Labels = nil
	if _, err := pcs.Update(w.ctx, pc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		if err := w.sharder.sync(w.ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{}); got.Labels[sharding.ShardLabel] != "" {
		t.Fatalf("assigned to %s while shard-a, live, may still run it", got.Labels[sharding.ShardLabel])
	}
	if n := len(recorder.Events); n != 1 {
		t.Fatalf("%d Events, want one ShardReleasePending", n)
	}
	if e := <-recorder.Events; e != "Normal ShardReleasePending The label multiproject.io/shard is missing, but shard shard-a (status.shard) is live and may still run the tenant; it is assigned again once that shard has stopped it and cleared status.shard, or its Lease ends" {
		t.Errorf("event %q", e)
	}

	// A tenant deleted and recreated in the same state is told about again.
	if err := w.caches["sharder"].Delete(stale); err != nil {
		t.Fatal(err)
	}
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if err := w.caches["sharder"].Add(stale); err != nil {
		t.Fatal(err)
	}
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if n := len(recorder.Events); n != 1 {
		t.Fatalf("%d Events for the recreated tenant, want one ShardReleasePending", n)
	}
	<-recorder.Events

	// shard-a has stopped the tenant and releases it: the sharder assigns it.
	if err := sharding.Release(w.ctx, w.client, tenant, "shard-a"); err != nil {
		t.Fatal(err)
	}
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	got, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	if want := Rendezvous(tenant, []string{"shard-a", "shard-b"}); got.Labels[sharding.ShardLabel] != want || got.Status.Shard != "" {
		t.Errorf("labels %v, status.shard %q: want assigned to %s", got.Labels, got.Status.Shard, want)
	}
}

// TestDrainerReleasesTheStatusBeforeTheLabels: once the labels are gone, only status.shard tells the sharder that the
// old shard may still run the tenant, so the drainer clears it first, after the tenant has stopped.
func TestDrainerReleasesTheStatusBeforeTheLabels(t *testing.T) {
	w := newWorld(t, 0, 1, []string{"shard-a", "shard-b"}, []string{"shard-a", "shard-b"})
	const tenant = "tenant-0"
	pcs := w.client.MultiprojectV1alpha1().ProviderConfigs()
	pc, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	if _, err := sharding.RecordOwner(w.ctx, w.client, pc, "shard-a"); err != nil {
		t.Fatal(err)
	}
	pc, _ = pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	pc.Labels[sharding.DrainLabel] = "true"
	if _, err := pcs.Update(w.ctx, pc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.refresh("shard-a")
	w.client.ClearActions()
	if err := w.drain["shard-a"].Sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, a := range w.client.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok {
			writes = append(writes, p.Subresource+":"+string(p.Patch))
		}
	}
	if len(writes) != 2 || writes[0][:7] != "status:" || writes[1][0] != ':' {
		t.Fatalf("writes %v, want the status cleared, then the labels removed", writes)
	}
	got, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	if got.Status.Shard != "" || len(got.Labels) != 0 || w.running["shard-a"][tenant] {
		t.Errorf("after the drain: labels %v, status.shard %q, running %v", got.Labels, got.Status.Shard, w.running["shard-a"][tenant])
	}
}
