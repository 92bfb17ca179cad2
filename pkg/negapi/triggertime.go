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

package negapi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TriggerTimeAnnotation on a Translation is the trigger time of the earliest endpoint change its last spec write
// carries: the EndpointSlice's corev1.EndpointsLastChangeTriggerTime, in the same format (RFC 3339, nanoseconds,
// UTC). Written with the spec in one request, so the Translation at a generation holds that generation's; "" when
// the write carried no slice change with a trigger time. The pusher and the readiness reflector measure the network
// programming latency from it.
const TriggerTimeAnnotation = "multiproject.io/last-change-trigger-time"

// TriggerTime parses the trigger-time annotation key of a slice's or a Translation's annotations; ok is false when
// it is absent, empty or not a time.
func TriggerTime(annotations map[string]string, key string) (t time.Time, ok bool) {
	v := annotations[key]
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// SliceTriggerTime is the EndpointSlice annotation TriggerTime reads from a slice.
const SliceTriggerTime = corev1.EndpointsLastChangeTriggerTime

// FormatTriggerTime writes a trigger time as the annotations hold it; the zero time is "".
func FormatTriggerTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
