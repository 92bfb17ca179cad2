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

package informerset

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

// applied is metadata as the API server returns it for an object made with kubectl apply: managedFields, the
// last-applied annotation, an annotation and a label a controller reads.
func applied(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels:        map[string]string{corev1.LabelTopologyZone: "zone-a", mpv1alpha1.DefaultProviderConfigLabelKey: "t1"},
		Annotations:   map[string]string{LastAppliedAnnotation: `{"apiVersion":"v1"}`, "cloud.google.com/neg": `{"exposed_ports":{"80":{}}}`},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
}

// TestTransformsKeepWhatControllersRead: managedFields go from every resource; the last-applied annotation from
// those no controller writes back with an Update of a cached copy, and stays on those it does (it would be removed
// from the API server); a Node keeps its metadata only; every other annotation, label, spec and status stays.
func TestTransformsKeepWhatControllersRead(t *testing.T) {
	for _, tc := range []struct {
		gvr         schema.GroupVersionResource
		obj         runtime.Object
		keepApplied bool
	}{
		{Services, &corev1.Service{ObjectMeta: applied("ns", "svc"), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, false},
		{Nodes, &corev1.Node{ObjectMeta: applied("", "node"), Spec: corev1.NodeSpec{ProviderID: "gce://p/z/n"},
			Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"img"}, SizeBytes: 1}}}}, false},
		{Namespaces, &corev1.Namespace{ObjectMeta: applied("", "ns")}, false},
		{Ingresses, &networkingv1.Ingress{ObjectMeta: applied("ns", "ing")}, true},
		{Translations, &mpv1alpha1.Translation{ObjectMeta: applied("ns", "tr")}, true},
		{PangolinResources, &tunnelv1alpha1.PangolinResource{ObjectMeta: applied("ns", "res")}, true},
	} {
		t.Run(tc.gvr.Resource, func(t *testing.T) {
			out, err := transformFor(tc.gvr)(tc.obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			m := out.(metav1.Object)
			if m.GetManagedFields() != nil {
				t.Error("managedFields kept")
			}
			if _, kept := m.GetAnnotations()[LastAppliedAnnotation]; kept != tc.keepApplied {
				t.Errorf("last-applied annotation kept: %v, want %v", kept, tc.keepApplied)
			}
			if m.GetAnnotations()["cloud.google.com/neg"] == "" || len(m.GetLabels()) != 2 {
				t.Errorf("an annotation or label a controller reads is gone: %v %v", m.GetAnnotations(), m.GetLabels())
			}
			switch o := out.(type) {
			case *corev1.Service:
				if len(o.Spec.Ports) != 1 {
					t.Error("a Service lost its ports")
				}
			case *corev1.Node:
				if o.Spec.ProviderID != "" || o.Status.Images != nil {
					t.Errorf("a Node kept its spec or status: %+v %+v", o.Spec, o.Status)
				}
			}
		})
	}
}

// TestSetCachesTrimmedObjects: the transforms are the ones the Set's informers run (Nodes and Pods).
func TestSetCachesTrimmedObjects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	node := &corev1.Node{ObjectMeta: applied("", "node"), Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"img"}}}}}
	pod := &corev1.Pod{ObjectMeta: applied("ns", "pod"), Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "c"}}}}
	set, err := New(Config{Client: fake.NewClientset(node, pod), Discovery: &switchableDiscovery{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.WaitForCacheSync(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	obj, exists, err := set.Informer(Nodes).GetIndexer().GetByKey("node")
	if err != nil || !exists {
		t.Fatalf("node not cached: %v %v", exists, err)
	}
	cached := obj.(*corev1.Node)
	if cached.Status.Images != nil || cached.Annotations[LastAppliedAnnotation] != "" || cached.ManagedFields != nil {
		t.Errorf("the cached Node is not trimmed: %+v", cached)
	}
	if cached.Labels[corev1.LabelTopologyZone] != "zone-a" {
		t.Errorf("the cached Node lost its zone: %v", cached.Labels)
	}
	obj, exists, err = set.Informer(Pods).GetIndexer().GetByKey("ns/pod")
	if err != nil || !exists {
		t.Fatalf("pod not cached: %v %v", exists, err)
	}
	if p := obj.(*corev1.Pod); p.Spec.Containers != nil || p.Annotations != nil || p.Spec.NodeName != "node" {
		t.Errorf("the cached Pod is not trimmed as TrimPod trims: %+v", p)
	}
}

// TestTrimPodKeepsExactlyWhatIsRead: of a Pod as a kubelet reports it, the cached copy keeps exactly the fields the
// neg translator and the NEG readiness reflector read, with their values, and nothing else.
func TestTrimPodKeepsExactlyWhatIsRead(t *testing.T) {
	created, deleted := metav1.Unix(1700000000, 0), metav1.Unix(1700000600, 0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", GenerateName: "web-", UID: "u1", ResourceVersion: "42",
			Generation: 3, Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b", LastAppliedAnnotation: "{}"},
			CreationTimestamp: created, DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: ptr.To[int64](30),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d9f8c", UID: "rs"}},
			Finalizers:      []string{"f"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "default", Hostname: "web-1",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "cloud.google.com/load-balancer-neg-ready"}},
			Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/web:v1",
				Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
			Volumes:     []corev1.Volume{{Name: "token"}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			HostIP: "10.128.0.2", HostIPs: []corev1.HostIP{{IP: "10.128.0.2"}}, QOSClass: corev1.PodQOSBestEffort, StartTime: &created,
			Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: "cloud.google.com/load-balancer-neg-ready", Status: corev1.ConditionFalse, Reason: "LoadBalancerNegNotReady", Message: "waiting"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Image: "registry.example.com/web:v1", ImageID: "sha256:0"}}},
	}
	original := pod.DeepCopy()
	out, err := transformFor(Pods)(pod)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Pod)

	raw, err := json.Marshal(trimmed)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for section, m := range fields {
		for field := range m {
			kept = append(kept, section+"."+field)
		}
	}
	slices.Sort(kept)
	want := []string{"metadata.creationTimestamp", "metadata.deletionTimestamp", "metadata.labels", "metadata.name",
		"metadata.namespace", "metadata.resourceVersion", "metadata.uid", "spec.containers", "spec.nodeName",
		"spec.readinessGates", "status.conditions", "status.phase", "status.podIP", "status.podIPs"}
	// spec.containers is required in JSON, so an empty list is written as null.
	if !reflect.DeepEqual(kept, want) || trimmed.Spec.Containers != nil {
		t.Errorf("the cached Pod keeps %v (containers %v); want %v", kept, trimmed.Spec.Containers, want)
	}
	if trimmed.Name != original.Name || trimmed.Namespace != original.Namespace || trimmed.UID != original.UID ||
		trimmed.ResourceVersion != original.ResourceVersion || !reflect.DeepEqual(trimmed.Labels, original.Labels) ||
		!trimmed.CreationTimestamp.Equal(&original.CreationTimestamp) || !trimmed.DeletionTimestamp.Equal(original.DeletionTimestamp) ||
		trimmed.Spec.NodeName != original.Spec.NodeName || !reflect.DeepEqual(trimmed.Spec.ReadinessGates, original.Spec.ReadinessGates) ||
		trimmed.Status.Phase != original.Status.Phase || trimmed.Status.PodIP != original.Status.PodIP ||
		!reflect.DeepEqual(trimmed.Status.PodIPs, original.Status.PodIPs) || !reflect.DeepEqual(trimmed.Status.Conditions, original.Status.Conditions) {
		t.Errorf("a kept field changed:\n%+v\nwas\n%+v", trimmed, original)
	}
}
