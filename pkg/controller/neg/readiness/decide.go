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
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The condition's reasons, as ingress-gce names them.
const (
	// ReasonNotReady: the Pod waits for its endpoint to be attached to a NEG, or to be reported healthy there.
	ReasonNotReady = "LoadBalancerNegNotReady"
	// ReasonWithoutHealthCheck: the endpoint is attached to a NEG that no backend service health checks.
	ReasonWithoutHealthCheck = "LoadBalancerNegWithoutHealthCheck"
	// ReasonReady: the endpoint is healthy in a NEG of a backend service, or the Pod belongs to no NEG.
	ReasonReady = "LoadBalancerNegReady"
	// ReasonTimeout: the timeout after the Pod's creation passed first; the condition is set True anyway, so a
	// broken health check cannot block a rollout forever.
	ReasonTimeout = "LoadBalancerNegTimeout"
)

// negRef names one NEG.
type negRef struct{ project, zone, name string }

func (n negRef) String() string { return n.zone + "/" + n.name }

// health is what GCE reports of the Pod's endpoint in one NEG.
type health int

const (
	// healthUnknown: not polled (not attached yet, or the poll failed), or GCE does not list the endpoint yet.
	healthUnknown health = iota
	// healthNoCheck: listed, and no backend service reports a health for it (the NEG is in none with a check).
	healthNoCheck
	// healthHealthy: HEALTHY for at least one backend service.
	healthHealthy
	// healthUnhealthy: backend services report it, none HEALTHY.
	healthUnhealthy
)

// membership is one NEG whose Translation lists the Pod's endpoint.
type membership struct {
	neg negRef
	// port is the endpoint's port (0: the NEG's default), and endpoint its addresses, to find it in GCE's list.
	port     int32
	endpoint addresses
	// attached: the pusher has synced the Translation's current spec (so the endpoint is in the NEG).
	attached bool
	// health is what the poll found, for an attached NEG.
	health health
	// states are the health states reported when none is HEALTHY, for the message.
	states []string
	// backendServices are the backend services the Translation's spec has the NEG join (issue 64): a NEG that is
	// to be in one is health checked there, so no health reported means "not checked yet", never "no check".
	backendServices []string
}

// input is everything decide looks at.
type input struct {
	// current is the Pod's condition, or nil.
	current *corev1.PodCondition
	created time.Time
	now     time.Time
	// timeout after created; 0 disables it.
	timeout time.Duration
	// negs are the NEGs whose Translation lists the Pod's IP.
	negs []membership
	// selected: a Service of the namespace that asks for NEGs selects the Pod, or one whose NEGs are frozen.
	selected bool
	// annotation is the name of the annotation that asks for NEGs, for the message about frozen Services.
	annotation string
	// frozen are the Services that select the Pod whose annotation does not parse while they have Translations.
	frozen []frozenService
	// unread: the informers may not hold every Service and Translation of the Pod's namespace yet (a shard
	// selector that newly holds it is read by each informer in turn, and the Pod's may come first), so that no
	// Service selecting the Pod proves nothing.
	unread bool
}

// frozenService is a Service whose annotation does not parse while it has Translations: the translator leaves them,
// and so its NEGs, as they were (a typo must not take a working port down), so an endpoint they do not list yet is
// not attached until the annotation is fixed. Answering its Pods True instead could let a rollout replace the Pods
// the NEGs do list with ones they never will, and drain them.
type frozenService struct {
	name string
	// err says why the annotation does not parse.
	err error
}

// verdict is what decide concludes.
type verdict struct {
	status          corev1.ConditionStatus
	reason, message string
	// write: the Pod's condition must change (a True verdict, or a first False); a False is written once, not again
	// with each new waiting message.
	write bool
	// poll: the Pod waits on GCE's health report of an attached endpoint; look again with backoff.
	poll bool
	// timeoutIn is how long until the timeout turns the condition True (0: none, or not waiting).
	timeoutIn time.Duration
}

// decide is the reflector's decision for one Pod that declares the gate, as ingress-gce's: True once the endpoint is
// healthy (or, where nothing health checks it, attached) in at least one of the Pod's NEGs (ingress-gce#931: a Pod
// in NEGs of several backend services must not wait for the slowest), True when the Pod is in no NEG and no NEG
// Service selects it (once the namespace's Services and Translations have been read), True at the timeout; False otherwise (a Service whose annotation does not parse selects its
// Pods when it has Translations, frozen: see frozenService).
func decide(in input) verdict {
	if in.current != nil && in.current.Status == corev1.ConditionTrue {
		return verdict{status: corev1.ConditionTrue, reason: in.current.Reason, message: in.current.Message}
	}
	v := ready(in)
	if v.status != corev1.ConditionTrue {
		deadline := in.created.Add(in.timeout)
		if in.timeout > 0 && !in.now.Before(deadline) {
			v = verdict{status: corev1.ConditionTrue, reason: ReasonTimeout, message: fmt.Sprintf(
				"Timed out after %s waiting for the endpoint to be ready in a NEG: %s", in.timeout, v.message)}
		} else if in.timeout > 0 {
			v.timeoutIn = deadline.Sub(in.now)
		}
	}
	v.write = in.current == nil || in.current.Status != v.status || in.current.Reason != v.reason
	return v
}

// ready is decide without the timeout.
func ready(in input) verdict {
	var attached, noCheck, healthy []string
	var unhealthy, notChecked []string
	for _, m := range in.negs {
		if !m.attached {
			continue
		}
		attached = append(attached, m.neg.String())
		switch m.health {
		case healthHealthy:
			healthy = append(healthy, m.neg.String())
		case healthNoCheck:
			if len(m.backendServices) > 0 {
				notChecked = append(notChecked, fmt.Sprintf("%s (backend services %s)", m.neg, strings.Join(m.backendServices, ", ")))
				continue
			}
			noCheck = append(noCheck, m.neg.String())
		case healthUnhealthy:
			unhealthy = append(unhealthy, fmt.Sprintf("%s (%s)", m.neg, strings.Join(m.states, ", ")))
		}
	}
	switch {
	case len(healthy) > 0:
		return verdict{status: corev1.ConditionTrue, reason: ReasonReady,
			message: "Healthy in NEG " + strings.Join(healthy, ", ")}
	case len(noCheck) > 0:
		return verdict{status: corev1.ConditionTrue, reason: ReasonWithoutHealthCheck,
			message: "Attached to NEG " + strings.Join(noCheck, ", ") + ", which no backend service health checks"}
	case len(in.negs) == 0 && !in.selected && in.unread:
		return verdict{status: corev1.ConditionFalse, reason: ReasonNotReady, poll: true,
			message: "Waiting for this replica to read the Services and Translations of the Pod's namespace"}
	case len(in.negs) == 0 && !in.selected:
		return verdict{status: corev1.ConditionTrue, reason: ReasonReady,
			message: "The Pod is not in any NEG: no Service that asks for NEGs selects it"}
	case len(notChecked) > 0 && len(unhealthy) == 0:
		return verdict{status: corev1.ConditionFalse, reason: ReasonNotReady, poll: true,
			message: "Waiting for the backend services the NEG joins to report the endpoint's health: " + strings.Join(notChecked, "; ")}
	case len(unhealthy) > 0:
		return verdict{status: corev1.ConditionFalse, reason: ReasonNotReady, poll: true,
			message: "Waiting for the endpoint to be healthy: " + strings.Join(unhealthy, "; ")}
	case len(attached) > 0:
		return verdict{status: corev1.ConditionFalse, reason: ReasonNotReady, poll: true,
			message: "Waiting for GCE to report the endpoint's health in NEG " + strings.Join(attached, ", ")}
	case len(in.frozen) > 0:
		names := make([]string, 0, len(in.frozen))
		for _, f := range in.frozen {
			names = append(names, f.name)
		}
		return verdict{status: corev1.ConditionFalse, reason: ReasonNotReady, message: fmt.Sprintf(
			"Waiting for the annotation %s of Service %s to be fixed: it does not parse, so the Service's NEGs stay as they were",
			in.annotation, strings.Join(names, ", "))}
	default:
		return verdict{status: corev1.ConditionFalse, reason: ReasonNotReady,
			message: "Waiting for the endpoint to be attached to the NEGs of the Services that select the Pod"}
	}
}
