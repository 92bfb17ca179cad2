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

// Package clusterid owns this cluster's identity towards the cloud: a UID that two clusters never share by default,
// kept in the cluster so that every replica, every restart and every upgrade of the manager reads the same one.
//
// GCP projects are shared between clusters (a Shared VPC host project is the common case), and a cloud resource
// carries nothing but its name and description to say which cluster made it. A readable --cluster-name is not
// enough: its default is the same string everywhere. The UID is seeded from the kube-system Namespace's UID, which
// the API server makes once per cluster, and recorded in a ConfigMap, where an operator can set it (for example to
// let a rebuilt cluster take over the cloud resources of the one it replaces, as ingress-gce's ingress-uid allows).
package clusterid

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

const (
	// ConfigMapName is the ConfigMap, in the manager's namespace (--leader-elect-resource-namespace), that records
	// the cluster UID.
	ConfigMapName = "multiproject-cluster-id"
	// UIDKey is the ConfigMap's data key holding the UID.
	UIDKey = "uid"
	// SeedNamespace is the Namespace whose UID seeds the identity: it exists in every cluster, from its creation on.
	SeedNamespace = "kube-system"
)

// Resolve returns the cluster UID recorded in namespace's ConfigMap, creating the ConfigMap from the kube-system
// Namespace's UID when it does not exist yet. Replicas racing to create it agree through the API server: the one
// that loses reads the winner's. Every replica seeds the same value, so a deleted ConfigMap comes back as it was unless an operator had changed it.
func Resolve(ctx context.Context, client kubernetes.Interface, namespace string) (string, error) {
	configMaps := client.CoreV1().ConfigMaps(namespace)
	cm, err := configMaps.Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err == nil {
		return uidOf(cm)
	}
	if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading the cluster identity %s/%s: %w", namespace, ConfigMapName, err)
	}
	seed, err := client.CoreV1().Namespaces().Get(ctx, SeedNamespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the Namespace %s, whose UID seeds the cluster identity: %w", SeedNamespace, err)
	}
	if seed.UID == "" {
		return "", fmt.Errorf("the Namespace %s has no UID", SeedNamespace)
	}
	cm = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ConfigMapName, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "multiproject-controller-manager"},
			Annotations: map[string]string{"multiproject.io/description": "The UID of this cluster in the names and " +
				"ownership markers of the cloud resources multiproject-controller-manager creates. Changing it makes " +
				"the manager treat the resources made under the old value as another cluster's (docs/neg.md)."},
		},
		Data: map[string]string{UIDKey: string(seed.UID)},
	}
	created, err := configMaps.Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case err == nil:
		return uidOf(created)
	case apierrors.IsAlreadyExists(err):
		// Another replica created it first: its value is the cluster's.
		cm, err = configMaps.Get(ctx, ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading the cluster identity %s/%s: %w", namespace, ConfigMapName, err)
		}
		return uidOf(cm)
	default:
		return "", fmt.Errorf("recording the cluster identity in %s/%s: %w", namespace, ConfigMapName, err)
	}
}

// uidOf validates the recorded UID: it goes into GCE descriptions and name hashes, so it must be a short, plain
// token; a ConfigMap edited by hand into something else is an error, never silently replaced.
func uidOf(cm *corev1.ConfigMap) (string, error) {
	uid := cm.Data[UIDKey]
	if msgs := validation.IsDNS1123Subdomain(uid); len(msgs) > 0 || len(uid) > 63 {
		return "", fmt.Errorf("the cluster identity %s/%s has an invalid %q: %q (a lowercase DNS name of at most 63 characters, such as a UID, is needed)",
			cm.Namespace, cm.Name, UIDKey, uid)
	}
	return uid, nil
}
