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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// probeControllers proves that kube-controller-manager's garbage collector and namespace controller are working
// before any test relies on them: kube-controller-manager runs without a serving port, and even with one its
// readiness would not say that the garbage collector has synced its view of the API. So the probe does what the
// tests will do: delete an owner and wait until its dependent is collected, then delete a namespace and wait
// until it is gone.
func (cp *ControlPlane) probeControllers(ctx context.Context, controllerManager *process) error {
	client := cp.adminClient
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "controlplane-readiness-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	configMaps := client.CoreV1().ConfigMaps(ns.Name)
	owner, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if _, err := configMaps.Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	background := metav1.DeletePropagationBackground
	if err := configMaps.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	err = waitReady(ctx, controllerManager, func(ctx context.Context) error {
		return goneOrError(configMaps.Get(ctx, dependent.Name, metav1.GetOptions{}))
	})
	if err != nil {
		return fmt.Errorf("the garbage collector did not delete a ConfigMap whose owner was deleted: %w", err)
	}

	err = client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	err = waitReady(ctx, controllerManager, func(ctx context.Context) error {
		return goneOrError(client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}))
	})
	if err != nil {
		return fmt.Errorf("the namespace controller did not finish deleting a namespace: %w", err)
	}
	return nil
}

var errStillExists = errors.New("still exists")

// goneOrError turns the result of a Get into nil when the object is gone, so it can be a readiness condition.
func goneOrError[T any](_ T, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	default:
		return errStillExists
	}
}
