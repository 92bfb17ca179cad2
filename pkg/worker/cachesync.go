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
	"context"

	"k8s.io/client-go/tools/cache"
)

// syncWait is one thing Start waits for: a DoneChecker (an informer or a handler registration, which closes a
// channel once synced) or, for a condition that has none, a function to poll.
type syncWait struct {
	checker cache.DoneChecker
	synced  cache.InformerSynced
}

// waitForSync waits until everything in waits has synced, and reports false if ctx ended first. The informers and
// handler registrations are waited for on their channels, so the first sync starts as soon as they have synced:
// cache.WaitForCacheSync polls every 100 ms, and a handler added to a running informer has never delivered its
// initial list at the first look, so every controller's start (every tenant's, on a cold start) waited a poll
// period for nothing. Only a condition that has no channel (WaitFor) is polled, and only if it is still false once
// the channels have closed.
func waitForSync(ctx context.Context, waits []syncWait) bool {
	var polled []cache.InformerSynced
	for _, wait := range waits {
		if wait.checker == nil {
			polled = append(polled, wait.synced)
			continue
		}
		select {
		case <-wait.checker.Done():
		case <-ctx.Done():
			return false
		}
	}
	for _, synced := range polled {
		if !synced() {
			return cache.WaitForCacheSync(ctx.Done(), polled...)
		}
	}
	return ctx.Err() == nil
}
