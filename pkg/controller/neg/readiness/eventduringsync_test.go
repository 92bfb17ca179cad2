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

package readiness

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestAnAttachSeenWhileThePodIsWrittenIsNotLost: the Translation's attach lands while the first sync of a gated Pod
// writes its False condition, after that sync has read the Translation unsynced. The attach's event must bring the
// Pod back: the sync counts the Pod as waiting before it reads. (Recorded as waiting only after the write, the event
// found no waiter and the Pod stayed False until its timeout.)
func TestAnAttachSeenWhileThePodIsWrittenIsNotLost(t *testing.T) {
	tr := translation("neg-v1-web-80", "neg-web", false, "10.0.0.1")
	var once sync.Once
	h := newHarness(t, 0, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "HEALTHY")
		seen := make(chan struct{})
		if _, err := h.r.translations.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, newObj any) {
				if tr, ok := newObj.(*mpv1alpha1.Translation); ok && negapi.TranslationSynced(tr) {
					once.Do(func() { close(seen) })
				}
			},
		}); err != nil {
			t.Fatal(err)
		}
		// The Pod's first write: the pusher's status write lands and is delivered to the informer's handlers
		// before the write returns to the sync.
		var attached sync.Once
		h.kube.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
			attached.Do(func() {
				done := tr.DeepCopy()
				markSynced(done)
				done.ResourceVersion = "2" // the fake clientset keeps it as given; the handlers skip an update that keeps it
				if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).UpdateStatus(context.Background(), done, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
					return
				}
				<-seen
			})
			return false, nil, nil
		})
	}, negService("web"), tr, gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))

	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
}
