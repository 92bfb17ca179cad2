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

package clusterid

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

const (
	managerNamespace = "kube-system"
	seedUID          = "0f9d6c2e-4b7a-4e0e-9a3c-5d1f2e3a4b5c"
)

func seed() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SeedNamespace, UID: seedUID}}
}

func recorded(namespace, uid string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: namespace},
		Data: map[string]string{UIDKey: uid}}
}

func TestResolveRecordsTheSeedOnce(t *testing.T) {
	client := fake.NewClientset(seed())
	uid, err := Resolve(context.Background(), client, managerNamespace)
	if err != nil || uid != seedUID {
		t.Fatalf("Resolve = %q, %v; want the kube-system UID %q", uid, err, seedUID)
	}
	cm, err := client.CoreV1().ConfigMaps(managerNamespace).Get(context.Background(), ConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Data[UIDKey] != seedUID {
		t.Fatalf("the ConfigMap was not recorded with the seed: %+v, %v", cm, err)
	}
	// A second resolve reads what was recorded, and writes nothing.
	client.ClearActions()
	if again, err := Resolve(context.Background(), client, managerNamespace); err != nil || again != seedUID {
		t.Fatalf("second Resolve = %q, %v", again, err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a second Resolve made a %s of %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestResolveKeepsWhatAnOperatorRecorded(t *testing.T) {
	client := fake.NewClientset(seed(), recorded(managerNamespace, "old-cluster-7f3a"))
	if uid, err := Resolve(context.Background(), client, managerNamespace); err != nil || uid != "old-cluster-7f3a" {
		t.Fatalf("Resolve = %q, %v; want the recorded value", uid, err)
	}
}

// Two replicas start at once: the one whose create loses reads the winner's value.
func TestResolveLosingTheCreateRaceReadsTheWinner(t *testing.T) {
	client := fake.NewClientset(seed())
	client.PrependReactor("create", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		// The other replica's create lands first, with a value an operator could have set.
		if err := client.Tracker().Add(recorded(managerNamespace, "winner-1234")); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, ConfigMapName)
	})
	if uid, err := Resolve(context.Background(), client, managerNamespace); err != nil || uid != "winner-1234" {
		t.Fatalf("Resolve = %q, %v; want the winner's value", uid, err)
	}
}

func TestResolveRefusesABadRecordOrNoSeed(t *testing.T) {
	for name, tc := range map[string]struct {
		objects []runtime.Object
		want    string
	}{
		"an invalid recorded value": {[]runtime.Object{seed(), recorded(managerNamespace, "Not A UID!")}, "invalid"},
		"an empty recorded value":   {[]runtime.Object{seed(), recorded(managerNamespace, "")}, "invalid"},
		"no kube-system Namespace":  {nil, "Namespace kube-system"},
	} {
		t.Run(name, func(t *testing.T) {
			uid, err := Resolve(context.Background(), fake.NewClientset(tc.objects...), managerNamespace)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Resolve = %q, %v; want an error naming %q", uid, err, tc.want)
			}
		})
	}
}
