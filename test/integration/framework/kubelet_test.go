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

package framework

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestKubeletReportsPodsAsAKubeletWouldAndConfirmsTheirDeletion: the stand-in reports a Pod bound to its Node
// Running with an IP of its range and its containers ready, holds Ready False while a readiness gate's condition is
// missing and turns it True once another writer sets that condition (which it leaves alone); a Pod without gates is
// Ready with another IP; a Pod bound to another Node is not touched; and a Pod's graceful deletion, which on a real
// API server waits for the kubelet, completes at once.
func TestKubeletReportsPodsAsAKubeletWouldAndConfirmsTheirDeletion(t *testing.T) {
	ctx := t.Context()
	client := controlPlane.AdminClient()
	ns := controlPlane.CreateNamespace(t)
	node := "kubelet-test-" + utilrand.String(6)
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	cidr := netip.MustParsePrefix("10.99.0.0/24")
	StartKubelet(t, client, KubeletOptions{Nodes: []string{node}, Namespace: ns, PodCIDR: cidr})

	const gate corev1.PodConditionType = "example.com/gate"
	gated := createPod(t, ns, "gated", node, gate)
	plain := createPod(t, ns, "plain", node)
	elsewhere := createPod(t, ns, "elsewhere", "another-node")

	gated = waitPod(t, ns, gated.Name, "Running with containers ready, not Ready for its gate", func(p *corev1.Pod) bool {
		ready := podCondition(p, corev1.PodReady)
		return p.Status.Phase == corev1.PodRunning && isTrue(p, corev1.ContainersReady) && isTrue(p, corev1.PodScheduled) &&
			isTrue(p, corev1.PodInitialized) && ready != nil && ready.Status == corev1.ConditionFalse &&
			ready.Reason == readinessGatesNotReady
	})
	gatedIP := netip.MustParseAddr(gated.Status.PodIP)
	if !cidr.Contains(gatedIP) || len(gated.Status.PodIPs) != 1 || gated.Status.PodIPs[0].IP != gated.Status.PodIP {
		t.Errorf("Pod IP %s (podIPs %v), want one in %s", gatedIP, gated.Status.PodIPs, cidr)
	}
	plain = waitPod(t, ns, plain.Name, "Ready", func(p *corev1.Pod) bool { return isTrue(p, corev1.PodReady) })
	if plain.Status.PodIP == gated.Status.PodIP || !cidr.Contains(netip.MustParseAddr(plain.Status.PodIP)) {
		t.Errorf("Pod IPs %s and %s, want two different ones in %s", plain.Status.PodIP, gated.Status.PodIP, cidr)
	}

	// Another writer (the NEG readiness reflector) sets the gate's condition with a patch of its own.
	patch := `{"status":{"conditions":[{"type":"` + string(gate) + `","status":"True","reason":"Test"}]}}`
	if _, err := client.CoreV1().Pods(ns).Patch(ctx, gated.Name, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	gated = waitPod(t, ns, gated.Name, "Ready once its gate is True", func(p *corev1.Pod) bool { return isTrue(p, corev1.PodReady) })
	if !isTrue(gated, gate) || gated.Status.PodIP != gatedIP.String() {
		t.Errorf("after Ready: gate condition %+v, IP %s; want the gate's condition kept and IP %s",
			podCondition(gated, gate), gated.Status.PodIP, gatedIP)
	}

	if p, err := client.CoreV1().Pods(ns).Get(ctx, elsewhere.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if p.Status.PodIP != "" || len(p.Status.Conditions) > 0 {
		t.Errorf("Pod on another Node got status %+v, want none", p.Status)
	}

	// The API server keeps a Pod bound to a Node until its kubelet confirms termination (30 s of grace by default).
	if err := client.CoreV1().Pods(ns).Delete(ctx, gated.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods(ns).Get(ctx, gated.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("Pod %s not deleted within 20 s of its graceful deletion: %v", gated.Name, err)
	}
}

func createPod(t *testing.T, ns, name, node string, gates ...corev1.PodConditionType) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	for _, g := range gates {
		pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
	}
	pod, err := controlPlane.AdminClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// waitPod polls the Pod until ok holds and returns it.
func waitPod(t *testing.T, ns, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := controlPlane.AdminClient().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return ok(pod), nil
	})
	if err != nil {
		t.Fatalf("Pod %s/%s not %s: %v; status %+v", ns, name, what, err, pod)
	}
	return pod
}

func isTrue(pod *corev1.Pod, typ corev1.PodConditionType) bool {
	c := podCondition(pod, typ)
	return c != nil && c.Status == corev1.ConditionTrue
}

// TestKubeletGivesDualStackPodsAnAddressOfEachFamily: with PodCIDRv6 a Pod gets an IPv4 address (podIP, first in
// podIPs) and an IPv6 one, each of its range; the next Pod gets the next of each.
func TestKubeletGivesDualStackPodsAnAddressOfEachFamily(t *testing.T) {
	client := controlPlane.AdminClient()
	ns := controlPlane.CreateNamespace(t)
	node := "kubelet-test-" + utilrand.String(6)
	if _, err := client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	v4, v6 := netip.MustParsePrefix("10.98.0.0/24"), netip.MustParsePrefix("fd00:98::/64")
	StartKubelet(t, client, KubeletOptions{Nodes: []string{node}, Namespace: ns, PodCIDR: v4, PodCIDRv6: v6})

	var got [][]string
	for _, name := range []string{"first", "second"} {
		p := waitPod(t, ns, createPod(t, ns, name, node).Name, "with IPs", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
		var ips []string
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		if len(ips) == 0 || ips[0] != p.Status.PodIP {
			t.Errorf("Pod %s: podIP %s, podIPs %v; want podIP first in podIPs", name, p.Status.PodIP, ips)
		}
		got = append(got, ips)
	}
	want := [][]string{{"10.98.0.1", "fd00:98::1"}, {"10.98.0.2", "fd00:98::2"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Pod IPs %v, want %v", got, want)
	}
}
