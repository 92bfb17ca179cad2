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

package sharder

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestSharderCountsItsSyncs: the sharder runs on the worker runtime, whose sync series it shares with every
// controller, with provider_config="" and controller="sharder".
func TestSharderCountsItsSyncs(t *testing.T) {
	succeededBefore := syncsCounted("sharder", "success")
	client := mpfake.NewClientset(&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-0"}})
	informer := mpinformers.NewProviderConfigInformer(client, 0, cache.Indexers{})
	s := New(Config{Group: "mp", Namespace: "kube-system", KubeClient: fake.NewClientset(shardLease("shard-a", t0)),
		Client: client, ProviderConfigs: informer, Recorder: record.NewFakeRecorder(10), Clock: testingclock.NewFakeClock(t0)})
	ctx := runInBackground(t, func(ctx context.Context) error { return s.Run(ctx, 1) })
	go informer.Run(ctx.Done())

	poll(t, "the tenant assigned", func() bool {
		pc, err := client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, "tenant-0", metav1.GetOptions{})
		return err == nil && pc.Labels[sharding.ShardLabel] == "shard-a"
	})
	poll(t, "the sync counted", func() bool { return syncsCounted("sharder", "success")-succeededBefore >= 1 })
}
