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

// Package config owns the runtime configuration of multiproject-controller-manager: what the options become once
// validated (clients, serving, event recording), and its completed form that Run accepts.
package config

import (
	"time"

	apiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/featuregate"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// Config is the validated configuration of the process.
type Config struct {
	// Controllers is the canonical --controllers list (aliases resolved).
	Controllers []string
	// ConcurrentSyncs maps a controller name to its worker count.
	ConcurrentSyncs        map[string]int
	ProviderConfigWorkers  int
	ProviderConfigLabelKey string
	ResyncPeriod           time.Duration
	ShutdownTimeout        time.Duration
	CacheSyncTimeout       time.Duration
	LeaderElection         componentbaseconfig.LeaderElectionConfiguration
	Debugging              componentbaseconfig.DebuggingConfiguration

	Kubeconfig           *restclient.Config
	Client               kubernetes.Interface
	MultiprojectClient   mpclientset.Interface
	LeaderElectionClient kubernetes.Interface
	// GatewayClient reads Gateway API objects and writes their status, where the cluster serves Gateway API.
	GatewayClient gatewayclientset.Interface

	// SecureServing is nil when --secure-port=0.
	SecureServing  *apiserver.SecureServingInfo
	Authentication apiserver.AuthenticationInfo
	Authorization  apiserver.AuthorizationInfo
	// Flagz is what /flagz reports (nil: no /flagz); FeatureGate is --feature-gates, whose ComponentFlagz and
	// ComponentStatusz gates decide whether /flagz and /statusz are served.
	Flagz       flagz.Reader
	FeatureGate featuregate.FeatureGate

	// EventBroadcaster records the process's own events (leader election); EventSink is where they go.
	EventBroadcaster record.EventBroadcaster
	EventRecorder    record.EventRecorder
	EventSink        record.EventSink

	// TenantControllers are the settings shared by every tenant's controllers.
	TenantControllers tenant.Options

	// Identity names this process in the leader-election Lease ("<host>_<uuid>"); empty means one is made up.
	Identity string
	// Sharding divides the tenants among every replica (--sharding).
	Sharding Sharding
}

// Sharding is --sharding and what a sharded replica needs.
type Sharding struct {
	Enabled bool
	// Group is the shard group (--shard-group): the replicas that share the tenants. It is set without --sharding
	// too: an unsharded leader leaves alone the tenants that a live shard of the group may still run.
	Group string
	// Shard is this process's shard name: its host name and a random suffix, never reused by another process.
	Shard string
	// ShardedWatch (--sharded-watch): the namespaced informers list and watch only the namespaces of this shard's
	// tenants, where the API server honours shard selectors.
	ShardedWatch bool
}

type completedConfig struct {
	*Config
}

// CompletedConfig can only be made by Complete, so Run never sees a config that skipped completion.
type CompletedConfig struct {
	*completedConfig
}

// Complete fills in what the options leave open.
func (c *Config) Complete() CompletedConfig {
	if c.ConcurrentSyncs == nil {
		c.ConcurrentSyncs = map[string]int{}
	}
	return CompletedConfig{&completedConfig{c}}
}

// WithClusterUID returns a completed config like c whose tenant controllers know the cluster's identity; c is left
// as it is, so a later term resolves again from the same config.
func (c CompletedConfig) WithClusterUID(uid string) CompletedConfig {
	cfg := *c.Config
	cfg.TenantControllers.ClusterUID = uid
	return CompletedConfig{&completedConfig{&cfg}}
}
