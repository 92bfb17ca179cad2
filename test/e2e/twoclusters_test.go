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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/clusterid"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// cluster is one Kubernetes cluster of TestTwoClustersShareAProject: its admin clients and what the test made in it.
type cluster struct {
	t    *testing.T
	name string
	cp   *framework.ControlPlane
	kube kubernetes.Interface
	mp   mpclientset.Interface
	// endpoints are the IPs each Service's EndpointSlice holds, in the one zone.
	endpoints map[string][]string
}

const twoClustersZone = "europe-west1-b"

func newCluster(t *testing.T, name string, cp *framework.ControlPlane) *cluster {
	t.Helper()
	mp, err := mpclientset.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, name: name, cp: cp, kube: cp.AdminClient(), mp: mp, endpoints: map[string][]string{}}
}

// populate makes, in this cluster, what a user of it would: an unlabeled zoned Node (every tenant's), the tenant's
// namespace and the tenant itself, with the same names as in the other cluster.
func (c *cluster) populate(tenant, namespace, node, project string) {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	_, err := c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{corev1.LabelTopologyZone: twoClustersZone}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{labelKey: tenant}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: project, Network: "default"}}}
	if _, err := c.mp.MultiprojectV1alpha1().ProviderConfigs().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// service creates a selector-less Service asking for a NEG of port 80, and its EndpointSlice with ips on node.
func (c *cluster) service(namespace, name, node string, ips ...string) {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	_, err := c.kube.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-http",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
			Zone: ptr.To(twoClustersZone), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := c.kube.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.endpoints[name] = ips
}

// negOf is the NEG name the Service's synced Translation declares, "" until there is one.
func (c *cluster) negOf(namespace, service string) string {
	tr, err := c.mp.MultiprojectV1alpha1().Translations(namespace).Get(c.t.Context(), translationName(service), metav1.GetOptions{})
	if err != nil || !synced(tr) || len(tr.Spec.Resources) == 0 {
		return ""
	}
	return tr.Spec.Resources[0].Name
}

// mismatch says how the fake GCE's NEGs differ from this cluster's Services: each Service's NEG must exist and hold
// exactly its endpoints; "" when they agree.
func (c *cluster) mismatch(gce *fakegce.Server, project, namespace string) string {
	var out []string
	for service, ips := range c.endpoints {
		name := c.negOf(namespace, service)
		if name == "" {
			out = append(out, fmt.Sprintf("%s: %s has no synced Translation", c.name, service))
			continue
		}
		eps, ok := gce.Endpoints(project, twoClustersZone, name)
		if !ok {
			out = append(out, fmt.Sprintf("%s: the NEG %s of %s does not exist", c.name, name, service))
			continue
		}
		var got []string
		for _, ep := range eps {
			got = append(got, ep.IpAddress)
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(ips)); !slices.Equal(got, want) {
			out = append(out, fmt.Sprintf("%s: the NEG %s of %s holds %v, want %v", c.name, name, service, got, want))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// sweeps counts, per manager (its User-Agent), the NEG listings of the project: each garbage sweep makes one.
type sweeps struct {
	mu      sync.Mutex
	project string
	counts  map[string]int
}

func (s *sweeps) record(r fakegce.CallRecord) {
	if r.Method != fakegce.MethodAggregatedList || r.Project != s.project {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[r.UserAgent]++
}

// fewest is the number of sweeps of the manager that swept least, over want managers.
func (s *sweeps) fewest(want int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.counts) < want {
		return 0
	}
	least := -1
	for _, n := range s.counts {
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

// TestTwoClustersShareAProject: two clusters, each with the shipped defaults (the same --cluster-name "default"),
// share one GCP project, as a Shared VPC host project is shared; the same tenant, namespace and Service names in
// both, and one more Service in the second. Each cluster's NEGs get names of their own (the cluster's UID is in
// them), hold exactly that cluster's endpoints, and survive the other cluster's garbage sweeps.
func TestTwoClustersShareAProject(t *testing.T) {
	resetLease(t)
	suffix := utilrand.String(5)
	tenant, namespace, node, project := "team-"+suffix, "web-"+suffix, "node-"+suffix, "shared-vpc-"+suffix
	counted := &sweeps{project: project, counts: map[string]int{}}
	gce := fakegce.New(fakegce.Options{OnCall: counted.record})
	gce.Start()
	t.Cleanup(gce.Close)

	cp2, err := framework.StartControlPlane(t.Context(), framework.Options{InstallProjectManifests: true})
	if err != nil {
		t.Fatalf("the second cluster's control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp2.Stop(); err != nil {
			t.Errorf("stopping the second cluster: %v", err)
		}
	})
	one, two := newCluster(t, "cluster one", controlPlane), newCluster(t, "cluster two", cp2)
	for i, c := range []*cluster{one, two} {
		c.populate(tenant, namespace, node, project)
		c.service(namespace, "app", node, fmt.Sprintf("10.%d.0.1", i+1), fmt.Sprintf("10.%d.0.2", i+1))
	}
	two.service(namespace, "only2", node, "10.2.1.1")

	kubeconfigTwo, err := cp2.ManagerConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigTwoPath := t.TempDir() + "/cluster-two.kubeconfig"
	if err := framework.WriteKubeconfig(kubeconfigTwoPath, kubeconfigTwo); err != nil {
		t.Fatal(err)
	}
	// The shipped defaults (no --cluster-name in the manifests or the chart), with a fast sweep.
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	startManager(t, "cluster-one", managerKubeconfig(t), gce.Endpoint(), le, "--cluster-name=default", "--neg-gc-period=1s")
	startManager(t, "cluster-two", kubeconfigTwoPath, gce.Endpoint(), le, "--cluster-name=default", "--neg-gc-period=1s")

	converged := func() string {
		return strings.Trim(one.mismatch(gce, project, namespace)+"; "+two.mismatch(gce, project, namespace), "; ")
	}
	var last string
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		last = converged()
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("the clusters did not converge: %s", last)
	}
	if a, b := one.negOf(namespace, "app"), two.negOf(namespace, "app"); a == b {
		t.Fatalf("both clusters' Service %s/app use the NEG %s", namespace, a)
	}
	for _, c := range []*cluster{one, two} {
		cm, err := c.kube.CoreV1().ConfigMaps(leaseNamespace).Get(t.Context(), clusterid.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s recorded no identity: %v", c.name, err)
		}
		seed, err := c.kube.CoreV1().Namespaces().Get(t.Context(), clusterid.SeedNamespace, metav1.GetOptions{})
		if err != nil || cm.Data[clusterid.UIDKey] != string(seed.UID) {
			t.Errorf("%s's identity is %q, want its kube-system UID %s (%v)", c.name, cm.Data[clusterid.UIDKey], seed.UID, err)
		}
	}

	// Several sweeps of each cluster, each after the last NEG was made; a NEG found unclaimed would be deleted once
	// the sweep's grace has passed, before the next sweep lists again.
	from := counted.fewest(2)
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return counted.fewest(2) >= from+3, nil
	})
	if err != nil {
		t.Fatalf("the managers did not sweep the project three more times: %v", counted.counts)
	}
	if got := converged(); got != "" {
		t.Errorf("after the sweeps: %s", got)
	}
	if n := len(gce.NEGs(project)); n != 3 {
		t.Errorf("the project holds %d NEGs, want 3 (app in each cluster, only2)", n)
	}
}
