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

package namespaceproject

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

const (
	remoteCluster = "c-abc12" // a downstream cluster's ID: its Projects are in the management cluster
	secretNS      = "multiproject-gcp-credentials"
	secretName    = "rancher-management"
	secretKey     = "kubeconfig"
)

var secretRef = mpv1alpha1.SecretKeyReference{Namespace: secretNS, Name: secretName, Key: secretKey}

// fakeManagementCluster is one Rancher management cluster: a fake clientset that can refuse or go away.
type fakeManagementCluster struct {
	*mpfake.Clientset
	down   atomic.Bool
	refuse atomic.Bool

	mu      sync.Mutex
	watches []watch.Interface
}

func newFakeManagementCluster(projects ...runtime.Object) *fakeManagementCluster {
	m := &fakeManagementCluster{Clientset: mpfake.NewClientset(projects...)}
	failure := func(verb string, action clienttesting.Action) error {
		switch {
		case m.down.Load():
			// What a client sees when nothing listens at the address.
			return &url.Error{Op: "Get", URL: "https://rancher.example/apis/management.cattle.io/v3/projects?" + verb,
				Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
		case m.refuse.Load():
			return apierrors.NewForbidden(schema.GroupResource{Group: "management.cattle.io", Resource: "projects"}, "",
				fmt.Errorf("User \"downstream\" cannot %s resource \"projects\" in the namespace %q", verb, action.GetNamespace()))
		}
		return nil
	}
	m.PrependReactor("list", "projects", func(action clienttesting.Action) (bool, runtime.Object, error) {
		err := failure("list", action)
		return err != nil, nil, err
	})
	m.PrependWatchReactor("projects", func(action clienttesting.Action) (bool, watch.Interface, error) {
		if err := failure("watch", action); err != nil {
			return true, nil, err
		}
		a := action.(clienttesting.WatchActionImpl)
		w, err := m.Tracker().Watch(a.GetResource(), a.GetNamespace(), a.ListOptions)
		if err == nil {
			m.mu.Lock()
			m.watches = append(m.watches, w)
			m.mu.Unlock()
		}
		return true, w, err
	})
	return m
}

// stop makes the cluster unreachable and ends the watches open on it, as a stopped API server does.
func (m *fakeManagementCluster) stop() {
	m.down.Store(true)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.watches {
		w.Stop()
	}
	m.watches = nil
}

// remoteHarness is a tenant's controller that reads Projects from fake management clusters, by server address.
type remoteHarness struct {
	*harness
	clusters map[string]*fakeManagementCluster
	configs  chan *rest.Config
}

func newRemoteHarness(t *testing.T, clusters map[string]*fakeManagementCluster, objects ...runtime.Object) *remoteHarness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	h := &remoteHarness{
		harness:  &harness{t: t, ctx: ctx, kube: kubefake.NewClientset(objects...), events: &recorder{}, conditions: &tenanttest.Conditions{}},
		clusters: clusters,
		configs:  make(chan *rest.Config, 100),
	}
	kubeFactory := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	h.namespaces = &countingInformer{SharedIndexInformer: kubeFactory.Core().V1().Namespaces().Informer()}
	kubeFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
	})
	kubeFactory.WaitForCacheSync(ctx.Done())

	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant},
		Spec: mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: remoteCluster,
			ManagementClusterKubeconfigSecretRef: secretRef.DeepCopy()}}}
	c, err := New(&tenant.Context{
		Controller:             "namespace-project",
		ProviderConfig:         pc,
		ProviderConfigLabelKey: mpv1alpha1.DefaultProviderConfigLabelKey,
		KubeClient:             h.kube,
		// No Projects informer: a downstream cluster does not serve them, and the controller must not ask.
		Informers:     tenanttest.Informers{informerset.Namespaces: h.namespaces},
		EventRecorder: h.events,
		Condition:     h.conditions,
		Options:       tenant.Options{AppOwnerLabelKey: appOwnerKey},
		Workers:       2,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.remote.newClient = func(cfg *rest.Config) (mpclientset.Interface, error) {
		h.configs <- cfg
		m, ok := h.clusters[cfg.Host]
		if !ok {
			return nil, fmt.Errorf("no fake management cluster at %s", cfg.Host)
		}
		return m, nil
	}
	// Re-read the Secret often, so a test of rotation does not wait a minute.
	c.remote.refresh, c.remote.retry = 10*time.Millisecond, 10*time.Millisecond
	h.controller = c
	return h
}

func kubeconfigFor(server, token string) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["rancher"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["rancher"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["rancher"] = &clientcmdapi.Context{Cluster: "rancher", AuthInfo: "rancher"}
	cfg.CurrentContext = "rancher"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		panic(err)
	}
	return data
}

func kubeconfigSecret(kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNS, Name: secretName},
		Data: map[string][]byte{secretKey: kubeconfig}}
}

func (h *remoteHarness) putSecret(kubeconfig []byte) {
	h.t.Helper()
	_, err := h.kube.CoreV1().Secrets(secretNS).Update(h.ctx, kubeconfigSecret(kubeconfig), metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = h.kube.CoreV1().Secrets(secretNS).Create(h.ctx, kubeconfigSecret(kubeconfig), metav1.CreateOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// waitCondition waits until the last reported condition has reason and a message containing substr.
func (h *remoteHarness) waitCondition(status metav1.ConditionStatus, reason, substr string) tenanttest.Condition {
	h.t.Helper()
	var last tenanttest.Condition
	h.waitFor(fmt.Sprintf("condition %s/%s with %q", status, reason, substr), func() bool {
		var ok bool
		last, ok = h.conditions.Last()
		return ok && last.Status == status && last.Reason == reason && strings.Contains(last.Message, substr)
	})
	return last
}

func (h *remoteHarness) waitAssigned(name, want string) {
	h.t.Helper()
	h.waitFor("namespace "+name+" in Project "+want, func() bool {
		return h.namespace(name).Annotations[rancherv3.ProjectIDAnnotationKey] == want
	})
}

// TestProjectsAreReadFromTheManagementCluster: the seed's example with the Project in Rancher's management cluster,
// read through the Secret's kubeconfig with the connection's own limits; Projects of another cluster there, and the
// downstream cluster's own Projects API (absent), play no part.
func TestProjectsAreReadFromTheManagementCluster(t *testing.T) {
	mgmt := newFakeManagementCluster(project(remoteCluster, "p-devops", "DevOps"), project("c-other", "p-other", "DevOps"))
	h := newRemoteHarness(t, map[string]*fakeManagementCluster{"https://rancher.example": mgmt},
		namespace("my-app", "DevOps"), kubeconfigSecret(kubeconfigFor("https://rancher.example", "s3cr3t")))
	h.run()

	h.waitAssigned("my-app", remoteCluster+":p-devops")
	h.waitCondition(metav1.ConditionTrue, ConditionReasonRunning, "read from Rancher's management cluster https://rancher.example")
	cfg := <-h.configs
	if cfg.BearerToken != "s3cr3t" || cfg.QPS != managementClusterQPS || cfg.Burst != managementClusterBurst {
		t.Errorf("management cluster client: token %q, qps %v, burst %d; want the kubeconfig's token and the connection's own limits",
			cfg.BearerToken, cfg.QPS, cfg.Burst)
	}
	for _, a := range mgmt.Actions() {
		if a.GetResource().Resource == "projects" && a.GetNamespace() != remoteCluster {
			t.Errorf("%s projects in namespace %q; only the cluster's namespace %s may be read", a.GetVerb(), a.GetNamespace(), remoteCluster)
		}
	}
	// The Event is recorded just after the patch returns.
	h.waitFor("the Assigned Event", func() bool { return len(h.events.with("my-app", ReasonAssigned)) > 0 })
	if got := h.events.with("my-app", ReasonAssigned); len(got) != 1 || !strings.Contains(got[0], remoteCluster+":p-devops") {
		t.Errorf("Assigned events: %q", got)
	}
}

// TestUnreachableManagementClusterChangesNothingThenConverges: while the management cluster is gone the condition
// says so with the error, and a namespace whose app owner changed meanwhile is left as it is; once the cluster
// answers again the namespace joins the Project it names now.
func TestUnreachableManagementClusterChangesNothingThenConverges(t *testing.T) {
	mgmt := newFakeManagementCluster(project(remoteCluster, "p-devops", "DevOps"), project(remoteCluster, "p-ops", "Ops"))
	h := newRemoteHarness(t, map[string]*fakeManagementCluster{"https://rancher.example": mgmt},
		namespace("my-app", "DevOps"), kubeconfigSecret(kubeconfigFor("https://rancher.example", "t")))
	h.run()
	h.waitAssigned("my-app", remoteCluster+":p-devops")
	h.waitCondition(metav1.ConditionTrue, ConditionReasonRunning, "")

	mgmt.stop()
	c := h.waitCondition(metav1.ConditionFalse, ConditionReasonRancherUnreachable, "connection refused")
	if !strings.Contains(c.Message, "https://rancher.example") || strings.Contains(c.Message, "?") {
		t.Errorf("message %q should name the server and not a request URL", c.Message)
	}
	// Counted before the relabel, so the sync its event causes is checked too.
	patches := len(h.patches())
	h.updateNamespace("my-app", func(ns *corev1.Namespace) { ns.Labels[appOwnerKey] = "Ops" })
	h.waitFor("the namespace view to see the relabel", func() bool {
		ns, err := h.controller.nsLister.Get("my-app")
		return err == nil && ns.Labels[appOwnerKey] == "Ops"
	})
	if err := h.controller.sync(h.ctx, "my-app"); err != nil {
		t.Fatal(err)
	}
	if got := len(h.patches()); got != patches {
		t.Fatalf("sent %d patches while the management cluster was unreachable", got-patches)
	}

	mgmt.down.Store(false)
	h.waitAssigned("my-app", remoteCluster+":p-ops")
	h.waitCondition(metav1.ConditionTrue, ConditionReasonRunning, "")
	// The recovered connection was not trusted: a new one read the Projects afresh.
	if n := len(h.configs); n != 2 {
		t.Errorf("%d connections made, want 2 (the first, and a fresh one after the outage)", n)
	}
}

// TestForbiddenUserThenRotatedKubeconfig: a user the management cluster refuses gives RancherForbidden and no
// assignment; the Secret rotated to a kubeconfig it accepts is used without a restart.
func TestForbiddenUserThenRotatedKubeconfig(t *testing.T) {
	refusing := newFakeManagementCluster(project(remoteCluster, "p-devops", "DevOps"))
	refusing.refuse.Store(true)
	accepting := newFakeManagementCluster(project(remoteCluster, "p-devops", "DevOps"))
	h := newRemoteHarness(t, map[string]*fakeManagementCluster{"https://old.example": refusing, "https://new.example": accepting},
		namespace("my-app", "DevOps"), kubeconfigSecret(kubeconfigFor("https://old.example", "old")))
	h.run()

	c := h.waitCondition(metav1.ConditionFalse, ConditionReasonRancherForbidden, "cannot list resource")
	for _, want := range []string{secretNS + "/" + secretName, "namespace " + remoteCluster, "https://old.example"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if err := h.controller.sync(h.ctx, "my-app"); err != nil {
		t.Fatal(err)
	}
	if p := h.patches(); len(p) != 0 {
		t.Fatalf("sent %d patches while refused", len(p))
	}

	h.putSecret(kubeconfigFor("https://new.example", "new"))
	h.waitAssigned("my-app", remoteCluster+":p-devops")
	h.waitCondition(metav1.ConditionTrue, ConditionReasonRunning, "https://new.example")
}

// TestKubeconfigSecretProblems: a missing Secret, and a kubeconfig that would run a command, are
// CredentialsUnavailable, and nothing is assigned; a usable Secret then gets the controller going.
func TestKubeconfigSecretProblems(t *testing.T) {
	mgmt := newFakeManagementCluster(project(remoteCluster, "p-devops", "DevOps"))
	h := newRemoteHarness(t, map[string]*fakeManagementCluster{"https://rancher.example": mgmt}, namespace("my-app", "DevOps"))
	h.run()
	h.waitCondition(metav1.ConditionFalse, ConditionReasonCredentialsUnavailable, "does not exist")

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["r"] = &clientcmdapi.Cluster{Server: "https://rancher.example"}
	cfg.AuthInfos["r"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/steal-secrets", APIVersion: "client.authentication.k8s.io/v1"}}
	cfg.Contexts["r"] = &clientcmdapi.Context{Cluster: "r", AuthInfo: "r"}
	cfg.CurrentContext = "r"
	execKubeconfig, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.putSecret(execKubeconfig)
	h.waitCondition(metav1.ConditionFalse, ConditionReasonCredentialsUnavailable, "exec runs a command")
	if len(h.configs) != 0 {
		t.Error("a client was built from a kubeconfig that runs a command")
	}

	h.putSecret(kubeconfigFor("https://rancher.example", "t"))
	h.waitAssigned("my-app", remoteCluster+":p-devops")
	if p := h.patches(); len(p) != 1 {
		t.Errorf("sent %d patches, want 1", len(p))
	}
}

// TestManagementClusterKubeconfigMustBeInline: credentials only from the Secret itself.
func TestManagementClusterKubeconfigMustBeInline(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)
		want   string
	}{
		"token and CA data":  {change: func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthorityData = []byte("x") }},
		"CA file":            {change: func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthority = "/etc/ca.crt" }, want: "certificate-authority"},
		"token file":         {change: func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.TokenFile = "/var/run/token" }, want: "tokenFile"},
		"client certificate": {change: func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientCertificate = "/tls.crt" }, want: "client-certificate"},
		"client key":         {change: func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.ClientKey = "/tls.key" }, want: "client-key"},
		"auth provider": {change: func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "gcp"}
		}, want: "auth-provider"},
		"no server": {change: func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "" }, want: "no cluster with a server"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := clientcmdapi.NewConfig()
			cluster := &clientcmdapi.Cluster{Server: "https://rancher.example"}
			user := &clientcmdapi.AuthInfo{Token: "t"}
			tc.change(cluster, user)
			cfg.Clusters["r"], cfg.AuthInfos["r"] = cluster, user
			cfg.Contexts["r"] = &clientcmdapi.Context{Cluster: "r", AuthInfo: "r"}
			data, err := clientcmd.Write(*cfg) // no current-context: the only context is used
			if err != nil {
				t.Fatal(err)
			}
			rc, err := managementClusterConfig(data, "ua")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && (rc.Host != "https://rancher.example" || rc.BearerToken != "t" || rc.UserAgent != "ua"):
				t.Errorf("config %+v", rc)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestLocalModeNeedsTheProjectsInformer: without a management cluster the controller reads this cluster's Projects
// through the shared informer, as before, and cannot be built without it.
func TestLocalModeNeedsTheProjectsInformer(t *testing.T) {
	h := newHarness(t)
	c := h.tenantContext(testTenant, testCluster)
	c.Informers = tenanttest.Informers{informerset.Namespaces: h.namespaces}
	if _, err := New(c); err == nil {
		t.Fatal("built without a Projects informer and without a management cluster")
	}
	if got := RequiredAPIs(&c.ProviderConfig.Spec); len(got) != 1 || got[0] != informerset.Projects {
		t.Errorf("RequiredAPIs without a management cluster = %v", got)
	}
	c.ProviderConfig.Spec.Rancher.ManagementClusterKubeconfigSecretRef = secretRef.DeepCopy()
	if got := RequiredAPIs(&c.ProviderConfig.Spec); len(got) != 0 {
		t.Errorf("RequiredAPIs with a management cluster = %v, want none", got)
	}
}
