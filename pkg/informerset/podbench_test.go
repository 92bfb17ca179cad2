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

package informerset_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// benchPods is how many Pods BenchmarkPodInformerMemory caches.
const benchPods = 5000

// benchPod is a Pod of a Deployment as the API server returns it once a kubelet runs it: one container with its
// environment, resources, probes and mounts, the projected token volume, the conditions and container statuses,
// and the managedFields of its writers.
func benchPod(i int) *corev1.Pod {
	name := fmt.Sprintf("web-7d9f8c6b5-%05d", i)
	start := metav1.Unix(1700000000, 0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("app-%04d", i%benchNamespaces), Name: name, GenerateName: "web-7d9f8c6b5-",
			Labels:          map[string]string{"app.kubernetes.io/name": "web", "pod-template-hash": "7d9f8c6b5"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-27T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "5e6f7a8b-9c0d-1e2f-3a4b-5c6d7e8f9a0b", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%benchNodes), ServiceAccountName: "default", RestartPolicy: corev1.RestartPolicyAlways,
			DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](30),
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "cloud.google.com/load-balancer-neg-ready"}},
			Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/team/web:v1.2.3", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
				ReadinessProbe:         &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, PeriodSeconds: 5},
				VolumeMounts:           []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, StartTime: &start,
			HostIP: "10.128.0.2", HostIPs: []corev1.HostIP{{IP: "10.128.0.2"}},
			PodIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: ptr.To(true), Image: "registry.example.com/team/web:v1.2.3",
				ImageID:     "registry.example.com/team/web@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
				ContainerID: "containerd://9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}}},
	}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled, "cloud.google.com/load-balancer-neg-ready"} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: start})
	}
	serverMeta(pod, false, "kube-controller-manager", "kubelet", "multiproject-controller-manager")
	return pod
}

// podHeap is the heap an informer of the Pods holds once synced: a plain client-go one (as a shared informer
// factory builds it), or the manager's (informerset.New's, with TrimPod).
func podHeap(b *testing.B, pods []k8sruntime.Object, manager bool) uint64 {
	kube := kubefake.NewClientset(pods...)
	decodedLists(kube)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := liveHeap()
	var synced func() bool
	var keep any
	if manager {
		set, err := informerset.New(informerset.Config{Client: kube, Discovery: servesAll{}})
		if err != nil {
			b.Fatal(err)
		}
		if err := set.Start(ctx); err != nil {
			b.Fatal(err)
		}
		synced, keep = set.HasSynced, set
	} else {
		factory := kubeinformers.NewSharedInformerFactory(kube, 0)
		informer := factory.Core().V1().Pods().Informer()
		factory.Start(ctx.Done())
		// Shutdown waits for the informers, which stop when ctx ends.
		defer func() {
			cancel()
			factory.Shutdown()
		}()
		synced, keep = informer.HasSynced, informer
	}
	waitSynced(b, ctx, synced)
	after := liveHeap()
	runtime.KeepAlive(keep)
	return after - before
}

// BenchmarkPodInformerMemory measures the heap per cached Pod of the manager's Pod informer (TrimPod) against a
// plain client-go informer of the same Pods (manager/bare; the manager's Set also holds its other, empty informers).
func BenchmarkPodInformerMemory(b *testing.B) {
	pods := make([]k8sruntime.Object, benchPods)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	var bare, manager uint64
	for range b.N {
		bare = podHeap(b, pods, false)
		manager = podHeap(b, pods, true)
		b.ReportMetric(float64(manager)/benchPods, "manager-B/pod")
		b.ReportMetric(float64(bare)/benchPods, "bare-B/pod")
		b.ReportMetric(float64(manager)/float64(bare), "manager/bare")
	}
	recordPodRow(b, float64(bare), float64(manager))
}
