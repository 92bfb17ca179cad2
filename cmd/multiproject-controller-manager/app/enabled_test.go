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

package app

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// warningLine is a klog text line of severity Warning: "W1127 12:00:00.000000 ...".
var warningLine = regexp.MustCompile(`(?m)^W\d{4} .*$`)

// TestNoControllerEnabledIsSaidLoudly: --controllers= and --controllers=-neg keep kube-controller-manager's meaning
// (no controller runs), but the process says so at Warning level and exports 0 on multiproject_controllers_enabled,
// which an alert sees; a value that enables controllers logs no warning and exports their number.
func TestNoControllerEnabledIsSaidLoudly(t *testing.T) {
	metrics.Register()
	out := &lockedBuffer{}
	// Without stderr, klog writes a line to the output of its severity and of every lower one: only the
	// WARNING output (warnings and worse, once each) is kept.
	klog.LogToStderr(false)
	klog.SetOutputBySeverity("INFO", io.Discard)
	klog.SetOutputBySeverity("WARNING", out)
	t.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	descriptors := NewControllerDescriptors()
	all := len(descriptors.KnownControllers())

	for _, tc := range []struct {
		flag        []string
		wantEnabled int
	}{
		{flag: []string{}, wantEnabled: 0},
		{flag: []string{"-neg"}, wantEnabled: 0},
		{flag: []string{"*", "-neg"}, wantEnabled: all - 1},
		{flag: []string{"*"}, wantEnabled: all},
	} {
		before := len(out.String())
		o := NewOptions(descriptors)
		o.Controllers = tc.flag
		controllers, err := descriptors.Canonicalize(o.Controllers)
		if err != nil {
			t.Fatal(err)
		}
		_, ctx := ktesting.NewTestContext(t)
		names := reportEnabled(ctx, controllers, descriptors)
		klog.Flush()
		if len(names) != tc.wantEnabled {
			t.Errorf("--controllers=%s enabled %v, want %d controllers", strings.Join(tc.flag, ","), names, tc.wantEnabled)
		}
		got, err := testutil.GetGaugeMetricValue(metrics.ControllersEnabled)
		if err != nil {
			t.Fatal(err)
		}
		if int(got) != tc.wantEnabled {
			t.Errorf("--controllers=%s: multiproject_controllers_enabled = %v, want %d", strings.Join(tc.flag, ","), got, tc.wantEnabled)
		}
		warnings := warningLine.FindAllString(out.String()[before:], -1)
		switch {
		case tc.wantEnabled == 0 && (len(warnings) != 1 || !strings.Contains(warnings[0], "--controllers="+strings.Join(tc.flag, ",")+" enables no per-tenant controller")):
			t.Errorf("--controllers=%s: warnings %q, want one saying no per-tenant controller runs", strings.Join(tc.flag, ","), warnings)
		case tc.wantEnabled > 0 && len(warnings) > 0:
			t.Errorf("--controllers=%s: unexpected warnings %q", strings.Join(tc.flag, ","), warnings)
		}
	}
}
