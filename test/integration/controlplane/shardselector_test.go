//go:build integration

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

package controlplane

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// This control plane runs kube-apiserver without --feature-gates=ShardedListAndWatch=true, as most clusters do. A
// replica started with --sharded-watch against it must find out at start and filter on the client; the e2e tests'
// control plane, which has the gate, shows the other answer (TestShardedWatchReadsOnlyTheShardsNamespaces).
func TestAPIServerWithoutTheShardingGateIgnoresShardSelectors(t *testing.T) {
	admin := controlPlane.AdminClient()
	nothing := sharding.NamespaceSelector(nil)

	// The selector that selects no namespace is accepted, not rejected, and ignored: the server answers with what
	// it would answer without it (the default namespace's kubernetes Service at least) and no ShardInfo.
	list, err := admin.CoreV1().Services(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{ShardSelector: nothing})
	if err != nil {
		t.Fatalf("listing Services with shard selector %q: %v", nothing, err)
	}
	if len(list.Items) == 0 || list.ShardInfo != nil {
		t.Fatalf("a server without the gate answered the selector of no namespace with %d Services and ShardInfo %+v; want every Service and no ShardInfo",
			len(list.Items), list.ShardInfo)
	}

	honoured, err := informerset.ProbeShardSelector(t.Context(), admin, nothing)
	if err != nil || honoured {
		t.Fatalf("the start-up probe against a server without the gate: honoured=%v, err=%v; want false, no error", honoured, err)
	}
}
