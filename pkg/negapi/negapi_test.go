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

package negapi

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// otherGate is a readiness gate of some other controller.
const otherGate corev1.PodConditionType = "example.com/other-ready"

// gatedPod is a Pod that declares the NEG readiness gate, whose containers are ready and whose gate is not set yet:
// ready but for the gate. The changes apply in order.
func gatedPod(changes ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: ReadinessGate}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	for _, change := range changes {
		change(p)
	}
	return p
}

func withCondition(t corev1.PodConditionType, s corev1.ConditionStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				p.Status.Conditions[i].Status = s
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
	}
}

func withGate(t corev1.PodConditionType) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: t})
	}
}

func withoutGates(p *corev1.Pod) { p.Spec.ReadinessGates = nil }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }

func TestReadyButForGate(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"containers ready, waiting for the gate", gatedPod(), true},
		{"the gate already True", gatedPod(withCondition(ReadinessGate, corev1.ConditionTrue), withCondition(corev1.PodReady, corev1.ConditionTrue)), true},
		{"the gate False", gatedPod(withCondition(ReadinessGate, corev1.ConditionFalse)), true},
		{"containers not ready", gatedPod(withCondition(corev1.ContainersReady, corev1.ConditionFalse)), false},
		{"no ContainersReady condition yet", gatedPod(func(p *corev1.Pod) { p.Status.Conditions = nil }), false},
		{"terminating", gatedPod(deleting), false},
		{"no gate", gatedPod(withoutGates), false},
		{"only another gate", gatedPod(withoutGates, withGate(otherGate), withCondition(otherGate, corev1.ConditionTrue)), false},
		{"another gate unset", gatedPod(withGate(otherGate)), false},
		{"another gate False", gatedPod(withGate(otherGate), withCondition(otherGate, corev1.ConditionFalse)), false},
		{"another gate True", gatedPod(withGate(otherGate), withCondition(otherGate, corev1.ConditionTrue)), true},
		{"another gate declared before ours, True", gatedPod(withoutGates, withGate(otherGate), withGate(ReadinessGate),
			withCondition(otherGate, corev1.ConditionTrue)), true},
	} {
		if got := DefaultKeys().ReadyButForGate(tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestExposedPorts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		annotations   map[string]string
		wantPorts     []ExposedPort
		wantAnnotated bool
		wantErr       bool
	}{
		{name: "not annotated"},
		{name: "another annotation only", annotations: map[string]string{StatusAnnotationKey: "{}"}},
		{name: "one port", annotations: map[string]string{AnnotationKey: `{"exposed_ports":{"80":{}}}`},
			wantPorts: []ExposedPort{{Port: 80}}, wantAnnotated: true},
		{name: "ingress only", annotations: map[string]string{AnnotationKey: `{"ingress":true}`},
			wantPorts: []ExposedPort{}, wantAnnotated: true},
		{name: "malformed", annotations: map[string]string{AnnotationKey: `{"exposed_ports":{"http":{}}}`},
			wantAnnotated: true, wantErr: true},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
		ports, annotated, err := DefaultKeys().ExposedPorts(svc)
		if annotated != tc.wantAnnotated || (err != nil) != tc.wantErr || !reflect.DeepEqual(ports, tc.wantPorts) {
			t.Errorf("%s: got %v, %v, %v; want %v, %v, error %v", tc.name, ports, annotated, err, tc.wantPorts, tc.wantAnnotated, tc.wantErr)
		}
	}
}

// TestKeys: the flags' keys, ingress-gce's where they name none; Validate refuses what the API server
// would (a key that is not a qualified name) and one annotation for both.
func TestKeys(t *testing.T) {
	if got := keysOf("", "", ""); got != DefaultKeys() {
		t.Errorf("keysOf(no keys) = %+v, want the defaults", got)
	}
	if got := keysOf("", "", "example.com/ready"); got.ReadinessGate != "example.com/ready" || got.Annotation != AnnotationKey {
		t.Errorf("keysOf(one key) = %+v", got)
	}
	if err := DefaultKeys().Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	for _, k := range []Keys{
		{Annotation: "", StatusAnnotation: StatusAnnotationKey, ReadinessGate: ReadinessGate},
		{Annotation: AnnotationKey, StatusAnnotation: "-bad-", ReadinessGate: ReadinessGate},
		{Annotation: AnnotationKey, StatusAnnotation: StatusAnnotationKey, ReadinessGate: "a b"},
		{Annotation: AnnotationKey, StatusAnnotation: AnnotationKey, ReadinessGate: ReadinessGate},
	} {
		if err := k.Validate(); err == nil {
			t.Errorf("%+v validates", k)
		}
	}
}

// TestThePreviousAnnotationIsReadUntilTheServiceMoves: with a previous key, a Service annotated only with it asks
// for NEGs (and is said to), one annotated with the current key is read from that one alone; without a previous key
// the old annotation asks for nothing.
func TestThePreviousAnnotationIsReadUntilTheServiceMoves(t *testing.T) {
	keys := withPrevious(keysOf("example.com/neg", "example.com/neg-status", "example.com/neg-ready"), AnnotationKey)
	service := func(annotations map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	}
	old := service(map[string]string{AnnotationKey: `{"exposed_ports":{"80":{}}}`})
	moved := service(map[string]string{AnnotationKey: `{"exposed_ports":{"80":{}}}`, "example.com/neg": `{"exposed_ports":{"443":{}}}`})
	if ports, annotated, err := keys.ExposedPorts(old); err != nil || !annotated || len(ports) != 1 || ports[0].Port != 80 || !keys.Asks(old) {
		t.Errorf("not moved: ports %v, annotated %v, err %v, asks %v; want port 80", ports, annotated, err, keys.Asks(old))
	}
	if _, before := keys.AskedOnlyWithPrevious(old); !before {
		t.Error("not moved: not said to ask with the previous key")
	}
	if ports, _, _ := keys.ExposedPorts(moved); len(ports) != 1 || ports[0].Port != 443 {
		t.Errorf("moved: ports %v, want 443 only (the current key's)", ports)
	}
	if _, before := keys.AskedOnlyWithPrevious(moved); before {
		t.Error("moved: said to ask with the previous key")
	}
	keys.PreviousAnnotation = ""
	if _, annotated, _ := keys.ExposedPorts(old); annotated || keys.Asks(old) {
		t.Error("without a previous key, the old annotation asks for NEGs")
	}
}

func TestAPreviousAnnotationMustDifferFromTheCurrentKeys(t *testing.T) {
	for _, previous := range []string{"example.com/neg", "example.com/neg-status", "not a key"} {
		keys := withPrevious(keysOf("example.com/neg", "example.com/neg-status", "example.com/neg-ready"), previous)
		if err := keys.Validate(); err == nil || !strings.Contains(err.Error(), "--neg-previous-annotation-key") {
			t.Errorf("previous %q: %v, want an error naming --neg-previous-annotation-key", previous, err)
		}
	}
	if err := DefaultKeys().Validate(); err != nil {
		t.Errorf("ingress-gce's keys, no previous one: %v", err)
	}
}

// TestKeysThatClashAreRefused: issue 57. A readiness gate named like a Pod condition Kubernetes sets, and a status
// annotation that is GKE's request annotation (or a request annotation that is GKE's status annotation) while the
// other key is the manager's own, are refused with a message naming both flags; ingress-gce's keys together, or
// keys of the manager's own, pass.
func TestKeysThatClashAreRefused(t *testing.T) {
	const mine, mineStatus, mineGate = "example.com/neg", "example.com/neg-status", "example.com/neg-ready"
	for _, tc := range []struct {
		keys Keys
		want []string
	}{
		{keysOf(mine, AnnotationKey, mineGate), []string{"--neg-status-annotation-key", "--neg-annotation-key", `"cloud.google.com/neg"`, "request annotation"}},
		{keysOf(StatusAnnotationKey, mineStatus, mineGate), []string{"--neg-annotation-key", "--neg-status-annotation-key", `"cloud.google.com/neg-status"`, "status annotation"}},
		{keysOf(mine, mineStatus, "Ready"), []string{"--neg-readiness-gate", `"Ready"`}},
		{keysOf(AnnotationKey, StatusAnnotationKey, "ContainersReady"), []string{"--neg-readiness-gate", `"ContainersReady"`}},
		{keysOf(mine, mineStatus, "PodScheduled"), []string{"--neg-readiness-gate"}},
		{keysOf(mine, mineStatus, "Initialized"), []string{"--neg-readiness-gate"}},
		{keysOf(mine, mineStatus, "DisruptionTarget"), []string{"--neg-readiness-gate"}},
		{keysOf(mine, mineStatus, "PodReadyToStartContainers"), []string{"--neg-readiness-gate"}},
	} {
		err := tc.keys.Validate()
		if err == nil {
			t.Errorf("%+v validates", tc.keys)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%+v: %v, want it to say %s", tc.keys, err, want)
			}
		}
	}
	for _, keys := range []Keys{DefaultKeys(), keysOf(mine, mineStatus, mineGate), keysOf(mine, StatusAnnotationKey, string(ReadinessGate)),
		keysOf(AnnotationKey, mineStatus, mineGate), keysOf(mine, mineStatus, "Readiness")} {
		if err := keys.Validate(); err != nil {
			t.Errorf("%+v: %v", keys, err)
		}
	}
}

// keysOf are the keys of the three flags, ingress-gce's where one is empty, as the tenant's parts read them.
func keysOf(annotation, statusAnnotation, readinessGate string) Keys {
	return Keys{Annotation: annotation, StatusAnnotation: statusAnnotation,
		ReadinessGate: corev1.PodConditionType(readinessGate)}.OrDefaults()
}

// withPrevious is k reading previous too (--neg-previous-annotation-key).
func withPrevious(k Keys, previous string) Keys {
	k.PreviousAnnotation = previous
	return k
}
