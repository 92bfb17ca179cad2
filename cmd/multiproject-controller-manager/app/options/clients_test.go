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
	"testing"
)

func TestTenantBudgetDefaultFollowsTheClientBudget(t *testing.T) {
	cases := []struct {
		args       []string
		qps        float32
		burst      int
		wantErrMsg string
	}{
		{args: []string{"--kube-api-qps=100", "--kube-api-burst=200"}, qps: 25, burst: 50},
		{args: []string{"--kube-api-qps=2", "--kube-api-burst=2"}, qps: 0.5, burst: 1},
		{args: []string{"--kube-api-qps-per-tenant=7", "--kube-api-burst-per-tenant=9"}, qps: 7, burst: 9},
		{args: []string{"--kube-api-qps-per-tenant=0"}, qps: 0, burst: 8},
		{args: []string{"--kube-api-qps-per-tenant=0", "--kube-api-burst-per-tenant=0"}, qps: 0, burst: 0},
		{args: []string{"--kube-api-qps=20", "--kube-api-qps-per-tenant=20", "--kube-api-burst-per-tenant=30"}, qps: 20, burst: 30},
	}
	for _, tc := range cases {
		o, _ := parse(t, tc.args...)
		if err := o.Validate(); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		if qps, burst := o.tenantBudget(); qps != tc.qps || burst != tc.burst {
			t.Errorf("%v: per-tenant budget = %v/%d, want %v/%d", tc.args, qps, burst, tc.qps, tc.burst)
		}
	}
}
