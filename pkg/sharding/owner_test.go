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

package sharding

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
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
	if pc, err = RecordOwner(w.ctx, w.client, pc, "shard-a"); err != nil {
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
	if got, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{}); got.Labels[ShardLabel] != "" {
		t.Fatalf("assigned to %s while shard-a, live, may still run it", got.Labels[ShardLabel])
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
	if err := Release(w.ctx, w.client, tenant, "shard-a"); err != nil {
		t.Fatal(err)
	}
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	got, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	if want := Rendezvous(tenant, []string{"shard-a", "shard-b"}); got.Labels[ShardLabel] != want || got.Status.Shard != "" {
		t.Errorf("labels %v, status.shard %q: want assigned to %s", got.Labels, got.Status.Shard, want)
	}
}

// TestRecordOwnerAndRelease: a shard records itself only on the object it read (a label changed since makes the
// write fail), and clears its record only when the labels as stored no longer give it the tenant, and only its own.
func TestRecordOwnerAndRelease(t *testing.T) {
	ctx := t.Context()
	newPC := func(labels map[string]string, recorded string) *mpfake.Clientset {
		return mpfake.NewClientset(&mpv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: labels, ResourceVersion: "7"},
			Status:     mpv1alpha1.ProviderConfigStatus{Shard: recorded}})
	}
	get := func(c *mpfake.Clientset) *mpv1alpha1.ProviderConfig {
		pc, err := c.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, "t", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pc
	}

	client := newPC(map[string]string{ShardLabel: "a"}, "")
	read := get(client)
	if pc, err := RecordOwner(ctx, client, read, "a"); err != nil || pc.Status.Shard != "a" {
		t.Fatalf("recording on the object as read: %v, %+v", err, pc)
	}
	// The API server refuses a patch whose resourceVersion is not the stored one (the fake clientset does not):
	// the write must carry the version read, and go to the status.
	var patch clienttesting.PatchActionImpl
	for _, a := range client.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok {
			patch = p
		}
	}
	if want := `{"metadata":{"resourceVersion":"7"},"status":{"shard":"a"}}`; string(patch.Patch) != want || patch.Subresource != "status" {
		t.Errorf("record patch %s on %q, want %s on the status", patch.Patch, patch.Subresource, want)
	}
	if pc, err := RecordOwner(ctx, mpfake.NewClientset(), read, "a"); err != nil || pc != nil {
		t.Errorf("recording on a deleted object: %v, %+v", err, pc)
	}

	for _, tc := range []struct {
		name         string
		labels       map[string]string
		recorded     string
		wantErr      error
		wantRecorded string
	}{
		{"owned again", map[string]string{ShardLabel: "a"}, "a", ErrStillOwned, "a"},
		{"draining", map[string]string{ShardLabel: "a", DrainLabel: "true"}, "a", nil, ""},
		{"label removed", nil, "a", nil, ""},
		{"another shard's record", nil, "b", nil, "b"},
	} {
		client := newPC(tc.labels, tc.recorded)
		if err := Release(ctx, client, "t", "a"); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: Release: %v, want %v", tc.name, err, tc.wantErr)
		}
		if got := get(client).Status.Shard; got != tc.wantRecorded {
			t.Errorf("%s: status.shard %q, want %q", tc.name, got, tc.wantRecorded)
		}
	}
	if err := Release(ctx, mpfake.NewClientset(), "t", "a"); err != nil {
		t.Errorf("releasing a deleted object: %v", err)
	}
}

// TestDrainerReleasesTheStatusBeforeTheLabels: once the labels are gone, only status.shard tells the sharder that the
// old shard may still run the tenant, so the drainer clears it first, after the tenant has stopped.
func TestDrainerReleasesTheStatusBeforeTheLabels(t *testing.T) {
	w := newWorld(t, 0, 1, []string{"shard-a", "shard-b"}, []string{"shard-a", "shard-b"})
	const tenant = "tenant-0"
	pcs := w.client.MultiprojectV1alpha1().ProviderConfigs()
	pc, _ := pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	if _, err := RecordOwner(w.ctx, w.client, pc, "shard-a"); err != nil {
		t.Fatal(err)
	}
	pc, _ = pcs.Get(w.ctx, tenant, metav1.GetOptions{})
	pc.Labels[DrainLabel] = "true"
	if _, err := pcs.Update(w.ctx, pc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.refresh("shard-a")
	w.client.ClearActions()
	if err := w.drain["shard-a"].sync(w.ctx, tenant); err != nil {
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
