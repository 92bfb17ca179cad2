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

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

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
