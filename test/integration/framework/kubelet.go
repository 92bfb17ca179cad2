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

package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// readinessGatesNotReady is the kubelet's reason for a Ready condition held False by a readiness gate.
const readinessGatesNotReady = "ReadinessGatesNotReady"

// DefaultKubeletPodCIDR is where a Kubelet hands out Pod IPs unless KubeletOptions.PodCIDR says otherwise.
var DefaultKubeletPodCIDR = netip.MustParsePrefix("10.240.0.0/16")

// KubeletOptions say which Pods a Kubelet serves.
type KubeletOptions struct {
	// Nodes are the (fake) Nodes it is the kubelet of: it serves the Pods whose spec.nodeName is one of them.
	Nodes []string
	// Namespace limits it to one namespace; "" serves every namespace.
	Namespace string
	// PodCIDR is where it hands out Pod IPs, in order; the zero value is DefaultKubeletPodCIDR. Two Kubelets of one
	// test that share Services need different ranges.
	PodCIDR netip.Prefix
	// PodCIDRv6, when set, makes the Pods dual-stack: each also gets the next IPv6 address of it, second in
	// podIPs as on a dual-stack cluster whose primary family is IPv4.
	PodCIDRv6 netip.Prefix
}

// Kubelet plays the kubelet of fake Nodes, since the control plane runs none, so that kube-controller-manager's
// deployment, replicaset and endpointslice controllers (Options.ExtraControllers) see Pods live and die as on a
// real cluster. For each Pod bound to one of its Nodes it writes, as a strategic-merge patch of pods/status (the
// kubelet's own way, which leaves the conditions other writers own, such as a readiness gate's, alone):
//   - phase Running, a Pod IP of its own, startTime;
//   - PodScheduled, Initialized and ContainersReady True at once (containers start and pass their probes
//     instantly; containerStatuses are not written, nothing here reads them);
//   - Ready as the kubelet computes it: ContainersReady True and the condition of every readiness gate True, else
//     False with the kubelet's reason ReadinessGatesNotReady; recomputed whenever the Pod's conditions change.
//
// A Pod whose deletion was requested (deletionTimestamp set) it deletes with grace period 0, as a kubelet confirms
// that the containers stopped; here they stop at once. It never schedules: a Pod names its Node (spec.nodeName,
// e.g. in a Deployment's template).
type Kubelet struct {
	client kubernetes.Interface
	nodes  sets.Set[string]
	lister cache.Indexer
	queue  *worker.Queue

	mu    sync.Mutex
	ips   map[types.UID][]netip.Addr // handed out, kept until the Pod is deleted
	pools []*ipPool                  // IPv4, then IPv6 when dual-stack
}

// ipPool hands out the addresses of a prefix in order.
type ipPool struct {
	next netip.Addr
	end  netip.Prefix
}

// StartKubelet starts a Kubelet with client (which must be allowed to patch pods/status and delete Pods) and waits
// until its Pod cache has synced. It stops when the test ends.
func StartKubelet(t testing.TB, client kubernetes.Interface, opts KubeletOptions) *Kubelet {
	t.Helper()
	cidr := opts.PodCIDR
	if !cidr.IsValid() {
		cidr = DefaultKubeletPodCIDR
	}
	k := &Kubelet{
		client: client,
		nodes:  sets.New(opts.Nodes...),
		ips:    map[types.UID][]netip.Addr{},
		pools:  []*ipPool{newIPPool(cidr)},
	}
	if opts.PodCIDRv6.IsValid() {
		k.pools = append(k.pools, newIPPool(opts.PodCIDRv6))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace))
	informer := factory.Core().V1().Pods().Informer()
	k.lister = informer.GetIndexer()
	k.queue = worker.New(worker.Config{
		Controller: "kubelet-standin",
		KeyName:    "pod",
		Workers:    2,
		Sync:       k.sync,
		// A test fixture: no sync metrics in the test binary's registry.
		Observe: func(string, error) {},
	})
	err := k.queue.Watch(informer, cache.ResourceEventHandlerFuncs{
		AddFunc: k.enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			if !worker.IsResync(oldObj, newObj) {
				k.enqueue(newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if pod, ok := worker.LastState(obj).(*corev1.Pod); ok {
				k.mu.Lock()
				delete(k.ips, pod.UID)
				k.mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	started := make(chan struct{})
	done := make(chan struct{})
	k.queue.Start(ctx, worker.RunOptions{Started: func() { close(started) }}, func() { close(done) })
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	select {
	case <-started:
	case <-t.Context().Done():
		t.Fatal("the kubelet stand-in's Pod cache did not sync before the test ended")
	}
	return k
}

func (k *Kubelet) enqueue(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && k.nodes.Has(pod.Spec.NodeName) {
		k.queue.AddObject(obj)
	}
}

// sync brings one Pod's status to what a kubelet would report, or confirms its deletion.
func (k *Kubelet) sync(ctx context.Context, key string) (worker.Result, error) {
	obj, exists, err := k.lister.GetByKey(key)
	if err != nil || !exists {
		return worker.Result{}, err
	}
	pod := obj.(*corev1.Pod)
	pods := k.client.CoreV1().Pods(pod.Namespace)
	switch {
	case !k.nodes.Has(pod.Spec.NodeName), pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		return worker.Result{}, nil
	case pod.DeletionTimestamp != nil:
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) { // gone, or another Pod of that name by now
			err = nil
		}
		return worker.Result{}, err
	}
	patch, err := k.statusPatch(pod)
	if err != nil || patch == nil {
		return worker.Result{}, err
	}
	_, err = pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return worker.Result{}, err
}

// statusPatch returns the strategic-merge patch that brings pod's status to the kubelet's view, nil when it is
// there already. Only the conditions the kubelet owns are sent, each only when it differs.
func (k *Kubelet) statusPatch(pod *corev1.Pod) ([]byte, error) {
	status := map[string]any{}
	if pod.Status.Phase != corev1.PodRunning {
		status["phase"] = corev1.PodRunning
	}
	if pod.Status.StartTime == nil {
		status["startTime"] = metav1.Now()
	}
	if pod.Status.PodIP == "" {
		ips, err := k.ipsFor(pod.UID)
		if err != nil {
			return nil, err
		}
		status["podIP"] = ips[0].String()
		podIPs := make([]corev1.PodIP, 0, len(ips))
		for _, ip := range ips {
			podIPs = append(podIPs, corev1.PodIP{IP: ip.String()})
		}
		status["podIPs"] = podIPs
	}
	var conditions []corev1.PodCondition
	want := func(typ corev1.PodConditionType, s corev1.ConditionStatus, reason, message string) {
		if c := podCondition(pod, typ); c != nil && c.Status == s && c.Reason == reason && c.Message == message {
			return
		}
		conditions = append(conditions, corev1.PodCondition{Type: typ, Status: s, Reason: reason, Message: message,
			LastTransitionTime: metav1.Now()})
	}
	want(corev1.PodScheduled, corev1.ConditionTrue, "", "")
	want(corev1.PodInitialized, corev1.ConditionTrue, "", "")
	want(corev1.ContainersReady, corev1.ConditionTrue, "", "")
	if msg := gatesNotReady(pod); msg == "" {
		want(corev1.PodReady, corev1.ConditionTrue, "", "")
	} else {
		want(corev1.PodReady, corev1.ConditionFalse, readinessGatesNotReady, msg)
	}
	if len(conditions) > 0 {
		status["conditions"] = conditions
	}
	if len(status) == 0 {
		return nil, nil
	}
	return json.Marshal(map[string]any{"status": status})
}

// gatesNotReady says, as the kubelet's message does, why the Pod's readiness gates hold it not Ready; "" when none
// does.
func gatesNotReady(pod *corev1.Pod) string {
	for _, gate := range pod.Spec.ReadinessGates {
		c := podCondition(pod, gate.ConditionType)
		if c == nil {
			return fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType)
		}
		if c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %s", gate.ConditionType, c.Status)
		}
	}
	return ""
}

func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// ipsFor returns the Pod's IPs (one per family), handing out the next free ones the first time: a Pod keeps its IPs
// while it lives, also when a sync runs again before the informer shows the first patch.
func (k *Kubelet) ipsFor(uid types.UID) ([]netip.Addr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ips, ok := k.ips[uid]; ok {
		return ips, nil
	}
	var ips []netip.Addr
	for _, pool := range k.pools {
		ip := pool.next
		if !pool.end.Contains(ip) {
			return nil, fmt.Errorf("the kubelet stand-in ran out of Pod IPs in %s", pool.end)
		}
		ips = append(ips, ip)
	}
	for _, pool := range k.pools {
		pool.next = pool.next.Next()
	}
	k.ips[uid] = ips
	return ips, nil
}

func newIPPool(cidr netip.Prefix) *ipPool {
	cidr = cidr.Masked()
	return &ipPool{next: cidr.Addr().Next(), end: cidr} // the first is the network's own address
}
