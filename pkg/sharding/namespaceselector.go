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

package sharding

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// NamespaceField is the field a replica's shard selector hashes: every namespaced object of a tenant lives in one
// of the tenant's namespaces, so a replica that selects its tenants' namespaces receives what they need.
const NamespaceField = "object.metadata.namespace"

// BucketBits is the resolution of a replica's coverage: the 64-bit FNV-1a hash of a namespace, which the API server
// computes (KEP-5866), is cut into 2^BucketBits buckets, and a replica selects whole buckets. 4,096 buckets keep
// the share of other replicas' namespaces a replica receives small (with 100 namespaces a replica covers 2.4 % of
// the hash space) while a bucket holds, on average, only a few namespaces of a large cluster.
const BucketBits = 12

// MaxSelectorTerms bounds the ranges of one selector: about 80 characters each, 256 of them are 20 KB, well under
// the CEL parser's 100,000 code points and the API server's 1 MiB limit on a request's header and URL. Coverage that
// needs more ranges is selected with fewer, wider ones (a superset: the Router still filters on the client).
const MaxSelectorTerms = 256

// NamespaceBucket is the bucket of a namespace: the high BucketBits bits of its FNV-1a hash, the hash the API
// server computes for shardRange(object.metadata.namespace, ...).
func NamespaceBucket(namespace string) uint32 {
	return uint32(namespaceHash(namespace) >> (64 - BucketBits))
}

func namespaceHash(namespace string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(namespace))
	return h.Sum64()
}

// bucketRange is [start, end) in buckets.
type bucketRange struct{ start, end uint64 }

// NamespaceSelector is the shard selector that selects every namespace in the given buckets: contiguous buckets
// are one range, and when that makes more than MaxSelectorTerms ranges, the ranges separated by the shortest gaps
// are joined. Without buckets it selects only the namespace "" (the hash cluster-scoped objects share), which no
// namespaced object has: nothing, in a form every API server that honours the selector accepts.
func NamespaceSelector(buckets []uint32) string {
	if len(buckets) == 0 {
		h := namespaceHash("")
		return term(h, h+1)
	}
	sorted := slices.Clone(buckets)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var runs []bucketRange
	for _, b := range sorted {
		if n := len(runs); n > 0 && runs[n-1].end == uint64(b) {
			runs[n-1].end++
			continue
		}
		runs = append(runs, bucketRange{uint64(b), uint64(b) + 1})
	}
	runs = joinShortestGaps(runs, MaxSelectorTerms)
	terms := make([]string, len(runs))
	shift := 64 - BucketBits
	for i, r := range runs {
		terms[i] = rangeTerm(r.start<<shift, r.end, shift)
	}
	return strings.Join(terms, " || ")
}

// joinShortestGaps joins neighbouring runs, shortest gap first, until at most max remain.
func joinShortestGaps(runs []bucketRange, max int) []bucketRange {
	if len(runs) <= max {
		return runs
	}
	gaps := make([]uint64, len(runs)-1)
	for i := range gaps {
		gaps[i] = runs[i+1].start - runs[i].end
	}
	sortedGaps := slices.Clone(gaps)
	slices.Sort(sortedGaps)
	// Joining every gap up to the threshold leaves at most max runs; ties at the threshold are joined only while
	// more than max remain.
	threshold := sortedGaps[len(runs)-max-1]
	toJoin := len(runs) - max
	out := []bucketRange{runs[0]}
	for i, g := range gaps {
		if g < threshold || (g == threshold && toJoin > 0) {
			out[len(out)-1].end = runs[i+1].end
			toJoin--
			continue
		}
		out = append(out, runs[i+1])
	}
	return out
}

// rangeTerm writes [start, end<<shift): the end of the last bucket is 2^64, which the API writes with 17 digits.
func rangeTerm(start, endBucket uint64, shift int) string {
	if endBucket == 1<<BucketBits {
		return fmt.Sprintf("shardRange(%s, '0x%016x', '0x10000000000000000')", NamespaceField, start)
	}
	return term(start, endBucket<<shift)
}

func term(start, end uint64) string {
	return fmt.Sprintf("shardRange(%s, '0x%016x', '0x%016x')", NamespaceField, start, end)
}
