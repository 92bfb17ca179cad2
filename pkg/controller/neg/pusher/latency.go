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

package pusher

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// programmedAt is the Translation generation whose network programming latency was observed last.
type programmedAt struct {
	uid        types.UID
	generation int64
}

// observeProgramming records the network programming latency of the Translation's generation once its spec is done
// in GCE (every NEG ensured with its endpoints, nothing failed): from the trigger time its last spec write carries
// (negapi.TriggerTimeAnnotation) to now. Each generation counts once, at its first sync that succeeds, retries
// included; a write without a trigger time is not observed.
func (s *negSync) observeProgramming(outcomes []outcome) {
	if permanent, retryable := problemOf(outcomes); permanent != nil || len(retryable) > 0 {
		return
	}
	trigger, ok := negapi.TriggerTime(s.tr.Annotations, negapi.TriggerTimeAnnotation)
	if !ok {
		return
	}
	at := programmedAt{uid: s.tr.UID, generation: s.tr.Generation}
	if was, seen := s.p.programmed.Load(s.key); seen {
		if w := was.(programmedAt); w.uid == at.uid && w.generation >= at.generation {
			return
		}
	}
	s.p.programmed.Store(s.key, at)
	metrics.ObserveNEGNetworkProgramming(s.p.tenant, trigger, time.Now())
}
