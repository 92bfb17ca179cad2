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

// Package neg composes the per-tenant `neg` controller from its three parts and owns what ends it.
//
// The translator (package translator) turns the tenant's annotated Services, their EndpointSlices and its Nodes
// into Translation objects; the pusher (package pusher) makes GCE hold what they declare and is the only writer to
// Compute Engine; the readiness reflector (package readiness) sets the readiness gate of the tenant's Pods once their
// endpoints are in the NEGs. They share the vocabulary of package negapi. New runs the three for a tenant, the
// translator and the pusher behind one NEGReady condition (neg.go); NewCleanup and Abandon end a tenant's NEGs when
// it no longer configures spec.gcp (cleanup.go). docs/neg.md describes the flow end to end.
package neg
