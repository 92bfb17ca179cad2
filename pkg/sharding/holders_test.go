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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// TestHoldersNameOnlyLiveShards: a tenant is held by the shard its label or status.shard names while that shard's
// Lease is live. A Lease the cache shows expired, released or absent counts as dead only once a read from the API
// server agrees (a lagging watch must not free a tenant a live shard runs), and that read is made once per shard.
func TestHoldersNameOnlyLiveShards(t *testing.T) {
	now := t0.Add(time.Minute)
	released := shardLease("released", now)
	released.Spec.HolderIdentity = nil
	apiLeases := []*coordinationv1.Lease{
		shardLease("live", now.Add(-time.Second)),
		shardLease("renewed", now.Add(-time.Second)), // the cache has an expired copy
		shardLease("expired", t0),
		released,
	}
	client := fake.NewClientset(apiLeases[0], apiLeases[1], apiLeases[2], apiLeases[3])
	h := NewHolders(HoldersConfig{Group: "mp", Namespace: "kube-system", KubeClient: client, Clock: testingclock.NewFakeClock(now)})
	for _, l := range []*coordinationv1.Lease{apiLeases[0], shardLease("renewed", t0), apiLeases[2], released} {
		_ = h.informer.GetIndexer().Add(l)
	}
	pc := func(label, recorded string) *mpv1alpha1.ProviderConfig {
		p := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Status: mpv1alpha1.ProviderConfigStatus{Shard: recorded}}
		if label != "" {
			p.Labels = map[string]string{ShardLabel: label}
		}
		return p
	}
	for _, tc := range []struct {
		label, recorded string
		want            string
		wantInCache     bool
	}{
		{"", "", "", false},
		{"live", "", "live", true},
		{"", "live", "live", true},
		{"expired", "live", "live", true},
		{"renewed", "", "renewed", false},
		{"expired", "", "", false},
		{"released", "", "", false},
		{"", "gone", "", false},
	} {
		got, expiry, err := h.Holder(t.Context(), pc(tc.label, tc.recorded))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want || (got != "" && !expiry.After(now)) {
			t.Errorf("label %q, status.shard %q: held by %q until %v, want %q", tc.label, tc.recorded, got, expiry, tc.want)
		}
		if in := h.HeldInCache(pc(tc.label, tc.recorded)); in != tc.wantInCache {
			t.Errorf("label %q, status.shard %q: held in cache %v, want %v", tc.label, tc.recorded, in, tc.wantInCache)
		}
	}
	reads := len(client.Actions())
	for _, shard := range []string{"expired", "released", "gone"} {
		if got, _, _ := h.Holder(t.Context(), pc(shard, "")); got != "" {
			t.Errorf("dead shard %s holds a tenant", shard)
		}
	}
	if n := len(client.Actions()) - reads; n != 0 {
		t.Errorf("%d more reads of Leases already found dead", n)
	}
}

// TestAShardYieldsOnlyToAnotherShard: the Holders of a shard (Self) never name that shard, whose label its own
// tenants carry, only another live shard that status.shard names.
func TestAShardYieldsOnlyToAnotherShard(t *testing.T) {
	now := t0.Add(time.Minute)
	client := fake.NewClientset(shardLease("me", now), shardLease("other", now))
	h := NewHolders(HoldersConfig{Group: "mp", Namespace: "kube-system", KubeClient: client, Clock: testingclock.NewFakeClock(now), Self: "me"})
	for _, tc := range []struct{ recorded, want string }{{"", ""}, {"me", ""}, {"other", "other"}} {
		pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{ShardLabel: "me"}},
			Status: mpv1alpha1.ProviderConfigStatus{Shard: tc.recorded}}
		if got, _, err := h.Holder(t.Context(), pc); err != nil || got != tc.want {
			t.Errorf("status.shard %q: held by %q (%v), want %q", tc.recorded, got, err, tc.want)
		}
	}
}

// TestReleasedIsAHolderChange: renewals do not bring the held tenants back to the unsharded controller; a release,
// a take-over or a delete does.
func TestReleasedIsAHolderChange(t *testing.T) {
	renewed := shardLease("a", t0.Add(time.Second))
	released := shardLease("a", t0)
	released.Spec.HolderIdentity = nil
	if Released(shardLease("a", t0), renewed) {
		t.Error("a renewal counts as a release")
	}
	if !Released(shardLease("a", t0), released) {
		t.Error("a release does not count")
	}
}
