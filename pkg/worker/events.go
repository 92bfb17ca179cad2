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

package worker

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// LastState returns the object a delete event is about: the last state a tombstone carries when the informer missed
// the deletion itself, or obj. Handlers that must pass the tombstone on keep obj and read this.
func LastState(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

// IsResync reports whether an update event carries no change: both states have the same resourceVersion, as the
// informer's periodic resync and a re-list of an unchanged object deliver. A sync reads only caches, which the
// event that changed them already announced, so such an update is skipped.
func IsResync(oldObj, newObj any) bool {
	oldMeta, err := meta.Accessor(oldObj)
	if err != nil {
		return false
	}
	newMeta, err := meta.Accessor(newObj)
	if err != nil {
		return false
	}
	return oldMeta.GetResourceVersion() == newMeta.GetResourceVersion()
}
