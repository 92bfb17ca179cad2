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

// Package readiness is the NEG readiness reflector, the third part of a tenant's neg controller beside the translator
// and the pusher: a Pod that declares the readiness gate cloud.google.com/load-balancer-neg-ready gets that
// condition once its endpoint is in the NEGs of the Services that select it (and, where a backend service health
// checks the NEG, reported healthy there), so that a rolling update never removes old Pods before the load balancer
// can reach the new ones. It follows ingress-gce's readiness reflector: decide.go is the pure decision and its
// reasons, sync.go gathers what a decision needs (the Pod, the Translations of its namespace and their status, the
// NEG Services that select it, the health GCE reports), health.go polls GCE once per NEG per round with the tenant's
// client and budget, write.go patches the Pod's condition and records the Event, and reflector.go builds it and turns
// events into Pod keys. The gate, the Service annotation and its parse are the translator's too (package negapi), so both read a Service
// the same way. A True condition is never turned back to False, and a Pod without the gate is never touched.
package readiness
