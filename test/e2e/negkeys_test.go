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
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// The manager's own keys in these tests, as on GKE beside GKE's NEG controller (docs/gke.md).
const (
	myNEGAnnotation = "example.com/neg"
	myNEGStatus     = "example.com/neg-status"
	myNEGGate       = "example.com/neg-ready"
)

// myNEGKeyFlags run the manager on its own keys.
var myNEGKeyFlags = []string{"--neg-annotation-key=" + myNEGAnnotation, "--neg-status-annotation-key=" + myNEGStatus,
	"--neg-readiness-gate=" + myNEGGate}

// TestNEGKeyMigrationKeepsEveryNEG follows docs/gke.md's procedure for moving a running installation from
// ingress-gce's keys to its own: the manager restarted on the new keys with --neg-previous-annotation-key keeps the
// NEGs of a Service still annotated with the old key (the same NEGs, not recreated) and keeps them following the
// endpoints; the Service moved to the new key keeps them; the manager restarted without the flag keeps them too.
func TestNEGKeyMigrationKeepsEveryNEG(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 500 * time.Millisecond}
	kubeconfig := managerKubeconfig(t)
	const svc = "web"

	// Before: ingress-gce's keys (the workload's Service asks with cloud.google.com/neg).
	old := startManager(t, "before", kubeconfig, gce.Endpoint(), le)
	waitLeader(t, old.identity(), 2*time.Minute)
	w.setService(svc, w.endpoints(0, 0, 2))
	before := waitNEGEndpoints(t, w, w.endpoints(0, 0, 2))

	// 1. The manager on the new keys, reading the old annotation meanwhile.
	old.signal(syscall.SIGTERM)
	if err := old.waitExit(2 * time.Minute); err != nil {
		t.Fatalf("manager before exited with %v after SIGTERM, want 0", err)
	}
	during := startManager(t, "during", kubeconfig, gce.Endpoint(), le,
		append(myNEGKeyFlags, "--neg-previous-annotation-key="+negapi.AnnotationKey)...)
	waitLeader(t, during.identity(), 2*time.Minute)
	w.setService(svc, w.endpoints(0, 1, 2))
	sameNEGs(t, "on the new keys, the Service not moved yet", before, waitNEGEndpoints(t, w, w.endpoints(0, 1, 2)))
	waitServiceAnnotation(t, w, svc, myNEGStatus)
	waitWarning(t, w, svc, negapi.ReasonPreviousAnnotation)

	// 2. The operator moves the Service: the new annotation with the same value, then the old one and its status go.
	patchServiceAnnotations(t, w, svc, map[string]any{myNEGAnnotation: `{"exposed_ports":{"80":{}}}`})
	patchServiceAnnotations(t, w, svc, map[string]any{negapi.AnnotationKey: nil, negapi.StatusAnnotationKey: nil})
	w.setService(svc, w.endpoints(0, 2, 2))
	sameNEGs(t, "the Service moved", before, waitNEGEndpoints(t, w, w.endpoints(0, 2, 2)))

	// 3. No Service asks with the old key any more: the flag goes.
	during.signal(syscall.SIGTERM)
	if err := during.waitExit(2 * time.Minute); err != nil {
		t.Fatalf("manager during exited with %v after SIGTERM, want 0", err)
	}
	after := startManager(t, "after", kubeconfig, gce.Endpoint(), le, myNEGKeyFlags...)
	waitLeader(t, after.identity(), 2*time.Minute)
	w.setService(svc, w.endpoints(0, 3, 2))
	sameNEGs(t, "the flag dropped", before, waitNEGEndpoints(t, w, w.endpoints(0, 3, 2)))
	if got := serviceAnnotations(t, w, svc); got[negapi.StatusAnnotationKey] != "" || got[myNEGStatus] == "" {
		t.Errorf("Service %s annotations %v: want %s and no %s", svc, got, myNEGStatus, negapi.StatusAnnotationKey)
	}
	w.teardown()
}

// waitNEGEndpoints waits until the tenant's project holds exactly one NEG per zone, holding exactly eps, and returns
// the NEGs ("zone/name" → id).
func waitNEGEndpoints(t *testing.T, w *workload, eps []endpoint) map[string]string {
	t.Helper()
	var negs map[string]string
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(w.ctx, 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		o, err := w.observe()
		if err != nil {
			why = err.Error()
			return false, nil
		}
		negs = o.negs
		if len(o.negs) != len(zones) {
			why = fmt.Sprintf("NEGs %v, want one per zone", o.negs)
			return false, nil
		}
		got := sets.New[string]()
		for _, e := range o.negEndpoints {
			got = got.Union(e)
		}
		want := sets.New[string]()
		for _, ep := range eps {
			want.Insert(fmt.Sprintf("%s/%s:8080", ep.node, ep.ip))
		}
		why = fmt.Sprintf("NEG endpoints %v, want %v", sorted(got), sorted(want))
		return got.Equal(want), nil
	})
	if err != nil {
		t.Fatalf("waiting for the NEGs: %v: %s", err, why)
	}
	return negs
}

// sameNEGs fails unless got are the NEGs of before, by name and id: deleted and made again would change the ids.
func sameNEGs(t *testing.T, when string, before, got map[string]string) {
	t.Helper()
	if !maps.Equal(before, got) {
		t.Fatalf("%s: NEGs %v, want those of before %v", when, got, before)
	}
}

func serviceAnnotations(t *testing.T, w *workload, name string) map[string]string {
	t.Helper()
	svc, err := w.kube.CoreV1().Services(w.appNS).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Annotations
}

func waitServiceAnnotation(t *testing.T, w *workload, name, key string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(w.ctx, 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		return serviceAnnotations(t, w, name)[key] != "", nil
	})
	if err != nil {
		t.Fatalf("Service %s never got %s: %v", name, key, err)
	}
}

func patchServiceAnnotations(t *testing.T, w *workload, name string, annotations map[string]any) {
	t.Helper()
	var parts []string
	for k, v := range annotations {
		if v == nil {
			parts = append(parts, fmt.Sprintf("%q:null", k))
		} else {
			parts = append(parts, fmt.Sprintf("%q:%q", k, v))
		}
	}
	patch := `{"metadata":{"annotations":{` + strings.Join(parts, ",") + `}}}`
	if _, err := w.kube.CoreV1().Services(w.appNS).Patch(w.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating Service %s: %v", name, err)
	}
}

// waitWarning waits for a Warning Event of the reason on the Service.
func waitWarning(t *testing.T, w *workload, name, reason string) {
	t.Helper()
	selector := fields.Set{"involvedObject.kind": "Service", "involvedObject.name": name, "reason": reason,
		"type": corev1.EventTypeWarning}.String()
	err := wait.PollUntilContextTimeout(w.ctx, 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		list, err := w.kube.CoreV1().Events(w.appNS).List(w.ctx, metav1.ListOptions{FieldSelector: selector})
		return err == nil && len(list.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("no Warning %s on Service %s: %v", reason, name, err)
	}
}
