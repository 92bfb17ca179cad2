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
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const (
	dualStackReplicas = 3
	// ipv6MirrorManager is the managed-by label of the test's IPv6 slice, so that kube-controller-manager's
	// EndpointSlice controller leaves it alone.
	ipv6MirrorManager = "ipv6-mirror.e2e.multiproject.io"
)

// TestADualStackRolloutKeepsEveryReadyPodInTheNEG: a Service's readiness-gated Pods are dual-stack and roll one at a
// time as a Deployment with maxUnavailable 0 and maxSurge 1 does (the test plays it: a new Pod, once it is Ready the
// old one deleted). kube-controller-manager's EndpointSlice controller publishes the IPv4 slice; the API server is
// single-stack, so the test publishes the IPv6 slice as that controller does on a dual-stack cluster, from the Pods
// it sees, in calls of its own (so either family's entry of a Pod can come first). Sampled every 50 ms and after
// every step, what docs/neg.md promises holds:
//   - every Ready Pod's endpoint is in the NEG with both its addresses (the gate let it through only then, and
//     nothing takes it out while it is Ready);
//   - every other endpoint is one of a Pod not Ready yet, which is attached before it can pass the gate, with both
//     addresses too; or one of a Pod being deleted or gone, whose detach may lag;
//
// and once the rollout is done the NEG holds exactly the Ready Pods, both addresses each, and every new Pod passed
// the gate because it was attached (LoadBalancerNegWithoutHealthCheck), not by the timeout.
func TestADualStackRolloutKeepsEveryReadyPodInTheNEG(t *testing.T) {
	resetLease(t)
	// GCE's operations take time, so that an endpoint out of the NEG while its Pod is Ready would be seen.
	gce := fakegce.New(fakegce.Options{OperationDelay: 500 * time.Millisecond})
	gce.Start()
	t.Cleanup(gce.Close)
	w := newWorkload(t, gce)
	startKubeletWith(t, w, framework.KubeletOptions{Nodes: []string{w.nodeName(0, 0)},
		PodCIDR: netip.MustParsePrefix("10.247.0.0/24"), PodCIDRv6: netip.MustParsePrefix("fd00:247::/64")})
	createNEGService(t, w, "web")
	publishIPv6Slice(t, w, "web")
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), lifecycleElection)
	waitLeader(t, m.identity(), 2*time.Minute)
	start := time.Now()

	r := &dualStackRollout{t: t, w: w, addresses: map[string]podAddresses{}}
	for i := range dualStackReplicas {
		r.createPod(fmt.Sprintf("web-1-%d", i))
	}
	r.waitFor("the first revision to be Ready and exactly in the NEG", func(s dualStackSample) bool {
		return s.exact && len(s.ready) == dualStackReplicas
	})
	var next []string
	for i := range dualStackReplicas {
		name := fmt.Sprintf("web-2-%d", i)
		next = append(next, name)
		r.createPod(name)
		r.waitFor(name+" to be Ready", func(s dualStackSample) bool { return s.ready[name] })
		if err := w.kube.CoreV1().Pods(w.appNS).Delete(w.ctx, fmt.Sprintf("web-1-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		r.check()
	}
	r.waitFor("the NEG to hold exactly the second revision", func(s dualStackSample) bool {
		return s.exact && slices.Equal(slices.Sorted(maps.Keys(s.ready)), next)
	})
	t.Logf("first revision and rollout in %s, %d samples, every Ready Pod in the NEG with both addresses at each",
		time.Since(start).Round(100*time.Millisecond), r.samples)
	for _, name := range next {
		p := waitPodState(t, w, name, "listed", func(*corev1.Pod) bool { return true })
		if c := podCondition(p, negReadyGate); c == nil || c.Reason != reasonNEGWithoutHealthCheck {
			t.Errorf("Pod %s: gate condition %+v, want True %s", name, c, reasonNEGWithoutHealthCheck)
		}
	}
}

// podAddresses are a Pod's IPv4 and IPv6 addresses.
type podAddresses struct{ ipv4, ipv6 string }

type dualStackRollout struct {
	t *testing.T
	w *workload
	// addresses of every Pod the test made, by name, once it had them: an endpoint of a gone Pod is known.
	addresses map[string]podAddresses
	samples   int
}

// dualStackSample is one look: the Ready Pods (not being deleted) and whether the NEG holds exactly their endpoints.
type dualStackSample struct {
	ready map[string]bool
	exact bool
}

func (r *dualStackRollout) createPod(name string) {
	r.t.Helper()
	createGatedPod(r.t, r.w, name, "web")
	r.check()
}

// check takes a sample and fails the test if it breaks the invariant.
func (r *dualStackRollout) check() dualStackSample {
	r.t.Helper()
	s, err := r.sample()
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// waitFor samples every 50 ms until done holds, failing the test at the first sample that breaks the invariant.
func (r *dualStackRollout) waitFor(what string, done func(dualStackSample) bool) {
	r.t.Helper()
	var broken error
	err := wait.PollUntilContextTimeout(r.w.ctx, 50*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		s, err := r.sample()
		if err != nil {
			broken = err
			return false, err
		}
		return done(s), nil
	})
	if broken != nil {
		r.t.Fatalf("waiting for %s: %v", what, broken)
	}
	if err != nil {
		r.t.Fatalf("%s: not within %s", what, convergeTimeout)
	}
}

// sample reads the Pods, then the NEGs (so a Pod deleted in between is still taken as live, and its endpoint is
// allowed to lag only once its deletion is seen), and returns an error naming what breaks the invariant.
func (r *dualStackRollout) sample() (dualStackSample, error) {
	r.samples++
	s := dualStackSample{ready: map[string]bool{}}
	pods, err := r.w.kube.CoreV1().Pods(r.w.appNS).List(r.w.ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return s, nil // the next sample reads again
	}
	live := map[string]string{} // IPv4 address → name of the Pod that is not being deleted
	for _, p := range pods.Items {
		if len(p.Status.PodIPs) == 2 {
			r.addresses[p.Name] = podAddresses{ipv4: p.Status.PodIPs[0].IP, ipv6: p.Status.PodIPs[1].IP}
		}
		if p.DeletionTimestamp != nil || r.addresses[p.Name].ipv4 == "" {
			continue
		}
		live[r.addresses[p.Name].ipv4] = p.Name
		if isPodConditionTrue(&p, corev1.PodReady) {
			s.ready[p.Name] = true
		}
	}
	inNEG := map[string]string{} // IPv4 address → IPv6 address
	for _, n := range r.w.gce.NEGs(r.w.project) {
		eps, _ := r.w.gce.Endpoints(r.w.project, path.Base(n.Zone), n.Name)
		for _, ep := range eps {
			inNEG[ep.IpAddress] = ep.Ipv6Address
		}
	}
	var errs []error
	for name := range s.ready {
		a := r.addresses[name]
		if v6, ok := inNEG[a.ipv4]; !ok || !sameAddress(v6, a.ipv6) {
			errs = append(errs, fmt.Errorf("Ready Pod %s (%s, %s): the NEG holds %s", name, a.ipv4, a.ipv6, endpointForm(v6, ok)))
		}
	}
	for ipv4, ipv6 := range inNEG {
		if name, ok := live[ipv4]; ok && !sameAddress(ipv6, r.addresses[name].ipv6) {
			errs = append(errs, fmt.Errorf("Pod %s (%s, %s) is in the NEG with IPv6 address %q", name, ipv4, r.addresses[name].ipv6, ipv6))
		}
		if !slices.ContainsFunc(slices.Collect(maps.Values(r.addresses)), func(a podAddresses) bool { return a.ipv4 == ipv4 }) {
			errs = append(errs, fmt.Errorf("the NEG holds %s, the address of no Pod", ipv4))
		}
	}
	s.exact = len(inNEG) == len(s.ready)
	return s, errors.Join(errs...)
}

func endpointForm(ipv6 string, in bool) string {
	switch {
	case !in:
		return "no endpoint of it"
	case ipv6 == "":
		return "its IPv4 address alone"
	}
	return "it with IPv6 address " + ipv6
}

// sameAddress compares two IPv6 addresses however each is written.
func sameAddress(a, b string) bool {
	x, errA := netip.ParseAddr(a)
	y, errB := netip.ParseAddr(b)
	return errA == nil && errB == nil && x == y
}

// publishIPv6Slice plays kube-controller-manager's EndpointSlice controller for a dual-stack Service's IPv6 family:
// one slice listing each Pod of app=service with an IPv6 address that is not being deleted, its conditions from the
// Pod's Ready condition and its targetRef, rewritten whenever a Pod changes, until the test ends.
func publishIPv6Slice(t *testing.T, w *workload, service string) {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(w.kube, 0, informers.WithNamespace(w.appNS))
	pods := factory.Core().V1().Pods()
	changed := make(chan struct{}, 1)
	signal := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: signal,
		UpdateFunc: func(_, obj any) { signal(obj) }, DeleteFunc: signal}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			list, _ := pods.Lister().Pods(w.appNS).List(labels.SelectorFromSet(labels.Set{"app": service}))
			if err := writeIPv6Slice(ctx, w, service, list); err != nil && ctx.Err() == nil {
				t.Logf("writing the IPv6 EndpointSlice of %s: %v", service, err)
				signal(nil) // again
			}
		}
	}()
}

func writeIPv6Slice(ctx context.Context, w *workload, service string, pods []*corev1.Pod) error {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: service + "-ipv6", Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: ipv6MirrorManager}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](servicePort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || len(p.Status.PodIPs) < 2 {
			continue
		}
		ready := isPodConditionTrue(p, corev1.PodReady)
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.Status.PodIPs[1].IP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
			NodeName:   ptr.To(p.Spec.NodeName), Zone: ptr.To(zones[0]),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		})
	}
	api := w.kube.DiscoveryV1().EndpointSlices(w.appNS)
	existing, err := api.Get(ctx, slice.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, slice, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	slice.ResourceVersion = existing.ResourceVersion
	_, err = api.Update(ctx, slice, metav1.UpdateOptions{})
	return err
}
