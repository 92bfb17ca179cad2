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

package options

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-base/version"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
)

// maxShardGroupLength keeps the group a label value with room to spare in the Lease name "<group>-<shard>".
const maxShardGroupLength = 63

// maxShardHostLength is how much of the host name a shard name keeps, before "-" and a 5-character suffix: a
// shard name is a label value of at most 63 characters. A Pod's host name is its name, which fits.
const maxShardHostLength = 57

// addShardingFlags adds --sharding, --shard-group and --sharded-watch.
func (o *Options) addShardingFlags(shfs *pflag.FlagSet) {
	shfs.BoolVar(&o.Sharding, "sharding", o.Sharding, "Divide the tenants among every replica instead of running them all on the leader. Each replica holds a shard Lease <shard-group>-<shard> in --leader-elect-resource-namespace, renewed with the --leader-elect-* timings, and runs the ProviderConfigs labeled multiproject.io/shard=<shard>; the elected replica assigns them. Requires --leader-elect.")
	shfs.StringVar(&o.ShardGroup, "shard-group", o.ShardGroup, "Name of the group of replicas that share the tenants with --sharding: the label multiproject.io/shard-group on their shard Leases. Without --sharding, the elected replica does not start a tenant that a live shard of this group may still run. A DNS label.")
	shfs.BoolVar(&o.ShardedWatch, "sharded-watch", o.ShardedWatch, "With --sharding, list and watch Services, EndpointSlices, Pods and Ingresses only in the namespaces of this replica's tenants, through the API server's shard selectors (KEP-5866: kube-apiserver 1.36 or later with --feature-gates=ShardedListAndWatch=true, alpha). Checked at start: where the API server ignores shard selectors, the replica reads every object and filters them itself, as without this flag, and says so in its log and in multiproject_shard_server_side_watch.")
}

// validateSharding checks --sharding and --shard-group.
func (o *Options) validateSharding() []error {
	var errs []error
	if o.Sharding && !o.LeaderElection.LeaderElect {
		errs = append(errs, errors.New("--sharding requires --leader-elect: the elected replica assigns the tenants to shards"))
	}
	if o.ShardedWatch && !o.Sharding {
		errs = append(errs, errors.New("--sharded-watch requires --sharding: only a shard reads less than every tenant's objects"))
	}
	// Unsharded, the group still names the shard Leases whose tenants the elected replica leaves alone.
	if msgs := validation.IsDNS1123Label(o.ShardGroup); len(msgs) > 0 || len(o.ShardGroup) > maxShardGroupLength {
		errs = append(errs, fmt.Errorf("--shard-group %q must be a DNS label of at most %d characters", o.ShardGroup, maxShardGroupLength))
	}
	return errs
}

// applyIdentity names this process: --leader-elect-identity, or "<host>_<uuid>", in the leader-election Lease, and
// with --sharding a shard name "<host>-<suffix>" that is a label value, new for every process (a restarted replica's
// tenants move once its old shard Lease expires: docs/sharding.md). Every Compute Engine call carries the name that
// says which replica made it (the shard, or the process), in its User-Agent.
func (o *Options) applyIdentity(c *config.Config) error {
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("this process's identity: %w", err)
	}
	c.Identity = o.LeaderElectionIdentity
	if c.Identity == "" {
		c.Identity = Identity(hostname)
	}
	agent := c.Identity
	c.Sharding = config.Sharding{Group: o.ShardGroup}
	if o.Sharding {
		c.Sharding = config.Sharding{Enabled: true, Group: o.ShardGroup, Shard: ShardName(hostname, utilrand.String(5)),
			ShardedWatch: o.ShardedWatch}
		agent = c.Sharding.Shard
		// Replicas that share the tenants decide who holds a host or NEG name through claim records, beside the
		// shard Leases.
		c.TenantControllers.ClaimsNamespace = o.LeaderElection.ResourceNamespace
	}
	c.TenantControllers.GCEUserAgent = names.ComponentName + "/" + version.Get().GitVersion + " (" + agent + ")"
	return nil
}

// Identity is a process's name in the leader-election Lease: "<host>_<uuid>". The UUID keeps two processes on one
// host from sharing it.
func Identity(hostname string) string { return hostname + "_" + string(uuid.NewUUID()) }

// ShardName makes a shard name from a host name and a random suffix: lower case, at most 63 characters, a label
// value and a DNS label. A restarted process draws a new suffix, so a shard name is never reused.
func ShardName(hostname, suffix string) string {
	host := strings.ToLower(hostname)
	host = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, host)
	if len(host) > maxShardHostLength {
		host = host[:maxShardHostLength]
	}
	host = strings.Trim(host, "-")
	if host == "" {
		return "shard-" + suffix
	}
	return host + "-" + suffix
}
