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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestALeaseOfARecordsNameIsNoRecordWithoutItsLabel: issue 57's squat. Before any claimant recorded a name, a
// neighbour creates a Lease of the record's predictable name with a forged claimant, created in 2000, that a live
// read finds claiming the name; unlabeled, or labeled for another kind. It is not taken as the record, from the
// cache or from the API server: the claimant is refused with errForeignRecord instead of told that the forgery
// holds the name, and the Lease is left as it is (not taken over).
func TestALeaseOfARecordsNameIsNoRecordWithoutItsLabel(t *testing.T) {
	for name, labels := range map[string]map[string]string{
		"unlabeled":              nil,
		"labeled another kind":   {KindLabel: "service"},
		"labeled something else": {"app": "neighbour"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			forged := claimant("ns-x/forged", "uid-forged", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
			c.setAlive(forged.UID, "h")
			squat := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: recordsNamespace, Name: RecordName("Ingress", "h"),
				Labels: labels, Annotations: map[string]string{annotationName: "h", annotationKey: forged.Key,
					annotationUID: string(forged.UID), annotationCreated: forged.Created.UTC().Format(time.RFC3339)}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("neighbour")}}
			squat, err := c.kube.CoordinationV1().Leases(recordsNamespace).Create(context.Background(), squat, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}

			p := c.process()
			tn := p.join("tenant-a")
			self := claimant("ns-a/web", "uid-a", t0)
			c.setAlive(self.UID, "h")
			tn.Claim(self, []string{"h"})
			// The process's cache shows the Lease (the test's informer selects every Lease, not only labeled ones).
			if _, found := tn.r.cachedRecord("h"); found {
				t.Error("the cache takes the Lease for the record of h")
			}
			holder, isSelf, err := tn.Decide(context.Background(), "h", self)
			if !errors.Is(err, errForeignRecord) {
				t.Errorf("Decide = holder %+v, self %v, %v; want errForeignRecord", holder, isSelf, err)
			}
			if _, err := tn.r.liveRecord(context.Background(), "h"); !errors.Is(err, errForeignRecord) {
				t.Errorf("liveRecord = %v, want errForeignRecord", err)
			}
			now, err := c.kube.CoordinationV1().Leases(recordsNamespace).Get(context.Background(), squat.Name, metav1.GetOptions{})
			if err != nil || now.ResourceVersion != squat.ResourceVersion {
				t.Errorf("the Lease was written (%v): the manager took it over as a record", err)
			}
		})
	}
}
