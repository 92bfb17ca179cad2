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
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// The identity the manager runs as, created by manifests/rbac.
const (
	ManagerServiceAccountNamespace = "kube-system"
	ManagerServiceAccountName      = "multiproject-controller-manager"
)

// serviceAccountTokenLifetime outlives the 30-minute integration timeout, so a token never expires mid-run.
const serviceAccountTokenLifetime = 2 * time.Hour

// AdminConfig returns a fresh copy of a config for a system:masters user, which RBAC never denies. Tests should use
// it to set up fixtures, and ServiceAccountConfig for the code under test.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.adminConfig) }

// AdminClient returns a clientset with AdminConfig.
func (cp *ControlPlane) AdminClient() kubernetes.Interface { return cp.adminClient }

// KubeconfigPath is the admin kubeconfig, for running binaries or kubectl against the control plane.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfigPath }

// RepoRoot is the repository's root directory.
func (cp *ControlPlane) RepoRoot() string { return cp.repoRoot }

// Dir is the control plane's temporary directory (data, credentials, one log file per component).
func (cp *ControlPlane) Dir() string { return cp.dir }

// AuditLogPath is kube-apiserver's audit log (Options.AuditPolicy), one JSON event per line; the file exists only
// when the control plane was started with an audit policy.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.dir, "audit.log") }

// ServiceAccountConfig returns a config that authenticates as the ServiceAccount namespace/name with a token from
// the TokenRequest API, so requests are authorized by RBAC exactly as for a Pod running as that ServiceAccount.
// The ServiceAccount must exist.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	request := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(serviceAccountTokenLifetime.Seconds()))},
	}
	token, err := cp.adminClient.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, request, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	// AnonymousClientConfig keeps the server address and TLS trust but drops the admin credentials.
	cfg := rest.AnonymousClientConfig(cp.adminConfig)
	cfg.BearerToken = token.Status.Token
	return cfg, nil
}

// ManagerConfig is ServiceAccountConfig for the manager's own ServiceAccount from manifests/rbac.
func (cp *ControlPlane) ManagerConfig(ctx context.Context) (*rest.Config, error) {
	return cp.ServiceAccountConfig(ctx, ManagerServiceAccountNamespace, ManagerServiceAccountName)
}

// CreateNamespace creates a namespace that only this test uses, named after the test plus a random suffix, and
// deletes it when the test ends. With the controller manager running, the namespace controller then removes
// everything in it.
func (cp *ControlPlane) CreateNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	ns, err := cp.adminClient.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace for the test: %v", err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := cp.adminClient.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the test's namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

var notInDNSLabel = regexp.MustCompile(`[^a-z0-9]+`)

// namespacePrefix turns a test name into a DNS label prefix short enough that the API server's random suffix
// still fits into 63 characters, so a leftover namespace says which test made it.
func namespacePrefix(testName string) string {
	prefix := strings.Trim(notInDNSLabel.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	if prefix == "" {
		prefix = "test"
	}
	return prefix + "-"
}

// WriteKubeconfig writes a kubeconfig file with cfg's server, CA and bearer token, for binaries and kubectl.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	const name = "integration"
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kubeconfig.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kubeconfig.CurrentContext = name
	return clientcmd.WriteToFile(*kubeconfig, path)
}
