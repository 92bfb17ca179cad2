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

// Package fakegce owns a fake Compute Engine server for zonal Network Endpoint Groups, for tests and local demos.
//
// The server speaks the compute/v1 REST protocol over HTTP, so code under test uses the real
// google.golang.org/api/compute/v1 client unchanged, pointed at the fake with option.WithEndpoint(s.Endpoint()). It
// implements the calls a NEG controller makes and the rules of the real API that such a controller can trip over:
//
//   - networkEndpointGroups insert, get, list, aggregatedList, delete, attachNetworkEndpoints,
//     detachNetworkEndpoints and listNetworkEndpoints, with maxResults/pageToken pagination;
//   - zoneOperations get and wait. Every mutating call returns an Operation. By default it is DONE at once; with
//     [Options.OperationDelay] or [Options.OperationPolls] it stays RUNNING, and its change to the state is applied
//     only when it completes, so a caller that does not wait for its operations sees stale state, as against GCE;
//   - the API's validation (RFC 1035 names, endpoint fields, at most 500 endpoints per attach or detach call,
//     duplicates, in-use NEGs) with error bodies that googleapi.CheckResponse parses into a *googleapi.Error carrying
//     the real code and reason.
//
// State is kept per project (every project exists; each tenant can use its own) and per zone, and is safe for
// concurrent use. For assertions the server counts calls per project and method ([Server.Calls]) and per zone
// ([Server.ZoneCalls]); it injects faults per project and method ([Server.InjectFault]), latency
// ([Server.SetLatency]) and a per-minute rate quota ([Server.SetQuota]) on an injectable clock; and it lets tests
// read and seed state directly ([Server.NEG], [Server.Endpoints], [Server.SeedNEG], [Server.SetInUseBy],
// [Server.AddInstance]), including the health that listNetworkEndpoints reports for an endpoint in a backend service
// ([Server.SetEndpointHealth], [Server.SetDefaultEndpointHealth]).
//
// docs/fake-gce.md lists which real-API rules are enforced, where each comes from, and what is not implemented.
package fakegce
