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

package tenant

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// The retirer deletes what Select picks, retries a failed delete with backoff, leaves the rest, and returns once
// its context ends.
func TestRetirerDeletesWhatItSelects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ours-1", Labels: map[string]string{"ours": "yes"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ours-2", Labels: map[string]string{"ours": "yes"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs"}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())

	var failures atomic.Int32
	r := &Retirer{
		Name:     "test-retirer",
		Informer: informer,
		Select: func(obj any) (string, bool) {
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok || cm.Labels["ours"] != "yes" {
				return "", false
			}
			return cm.Namespace + "/" + cm.Name, true
		},
		Delete: func(ctx context.Context, key string) error {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			if name == "ours-2" && failures.Add(1) == 1 {
				return errors.New("refused once")
			}
			err := client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1 && list.Items[0].Name == "theirs", nil
	})
	if err != nil {
		t.Fatalf("waiting for exactly the selected ConfigMaps to go: %v", err)
	}
	if n := failures.Load(); n < 2 {
		t.Errorf("the refused delete was tried %d times, want a retry", n)
	}
	cancel()
	<-done
}
