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

package translator

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// apiVersions makes the fake clientsets do what the translator relies on and their tracker does not, as the API
// server does: give a created object a UID and generation 1, give every created, updated or patched object a new
// resourceVersion and a changed spec a new generation, and refuse an update made on an older version (409
// Conflict).
type apiVersions struct{ last atomic.Int64 }

func (v *apiVersions) next() string { return strconv.FormatInt(v.last.Add(1), 10) }

// stamp gives an object the fake API starts with a resourceVersion.
func (v *apiVersions) stamp(obj runtime.Object) {
	if m, err := meta.Accessor(obj); err == nil && m.GetResourceVersion() == "" {
		m.SetResourceVersion(v.next())
	}
}

func (v *apiVersions) serve(fake *clienttesting.Fake, tracker clienttesting.ObjectTracker) {
	fake.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a := action.(clienttesting.CreateAction)
		if a.GetSubresource() != "" {
			return false, nil, nil
		}
		obj := a.GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + v.next()))
		}
		m.SetResourceVersion(v.next())
		m.SetGeneration(1)
		if err := tracker.Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	fake.PrependReactor("update", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a := action.(clienttesting.UpdateAction)
		obj := a.GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		sm, _ := meta.Accessor(stored)
		if m.GetResourceVersion() != "" && m.GetResourceVersion() != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		m.SetResourceVersion(v.next())
		m.SetGeneration(sm.GetGeneration())
		if a.GetSubresource() == "" && specChanged(stored, obj) {
			m.SetGeneration(sm.GetGeneration() + 1)
		}
		if err := tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	fake.PrependReactor("patch", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a := action.(clienttesting.PatchAction)
		if a.GetPatchType() != types.MergePatchType && a.GetPatchType() != types.JSONPatchType {
			return false, nil, nil
		}
		stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), a.GetName())
		if err != nil {
			return true, nil, err
		}
		original, err := json.Marshal(stored)
		if err != nil {
			return true, nil, err
		}
		var patched []byte
		if a.GetPatchType() == types.JSONPatchType {
			// The library kube-apiserver applies JSON patches with; a failed test is its 422.
			p, err := jsonpatch.DecodePatch(a.GetPatch())
			if err != nil {
				return true, nil, err
			}
			if patched, err = p.Apply(original); err != nil {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: a.GetResource().Group, Kind: a.GetResource().Resource},
					a.GetName(), field.ErrorList{field.Invalid(field.NewPath("patch"), string(a.GetPatch()), err.Error())})
			}
		} else {
			var doc, patch any
			err = json.Unmarshal(original, &doc)
			if err == nil {
				err = json.Unmarshal(a.GetPatch(), &patch)
			}
			if err != nil {
				return true, nil, err
			}
			if patched, err = json.Marshal(mergePatch(doc, patch)); err != nil {
				return true, nil, err
			}
		}
		if string(patched) == string(original) {
			// Nothing changed: no new version and no event, as the API server does.
			return true, stored, nil
		}
		obj := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal(patched, obj); err != nil {
			return true, nil, err
		}
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(v.next())
		if sm, _ := meta.Accessor(stored); a.GetSubresource() == "" && specChanged(stored, obj) {
			m.SetGeneration(sm.GetGeneration() + 1)
		}
		if err := tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
}

// specChanged says whether two versions of an object differ in more than their metadata and status.
func specChanged(a, b runtime.Object) bool {
	strip := func(obj runtime.Object) map[string]any {
		var out map[string]any
		data, _ := json.Marshal(obj)
		_ = json.Unmarshal(data, &out)
		delete(out, "metadata")
		delete(out, "status")
		delete(out, "kind")
		delete(out, "apiVersion")
		return out
	}
	return !reflect.DeepEqual(strip(a), strip(b))
}

// mergePatch applies a JSON merge patch (RFC 7386) to a decoded document.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
		} else {
			d[k] = mergePatch(d[k], v)
		}
	}
	return d
}

// watchStarts records which resources the fake clientsets serve a watch of. The fakes cannot resume a watch from a
// resourceVersion, so an object changed after an informer's list and before its watch starts is never delivered:
// a harness waits for every watch before a test writes anything.
type watchStarts struct {
	mu      sync.Mutex
	started sets.Set[string]
}

// serve answers the fake's watches as its own reactor does, and records each once the tracker delivers to it.
func (w *watchStarts) serve(fake *clienttesting.Fake, tracker clienttesting.ObjectTracker) {
	fake.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if watchAction, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = watchAction.ListOptions
		}
		watcher, err := tracker.Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		w.mu.Lock()
		w.started.Insert(a.GetResource().Resource)
		w.mu.Unlock()
		return true, watcher, nil
	})
}

func (w *watchStarts) wait(t testing.TB, resources ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.started.HasAll(resources...), nil
	})
	if err != nil {
		t.Fatalf("the informers never started watching %v", resources)
	}
}
