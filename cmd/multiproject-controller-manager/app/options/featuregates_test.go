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
	"bytes"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
)

// parseWithGate is parse with a feature gate of the test's own, holding the logging gates as the command's does,
// so that --feature-gates does not change the process-wide gate other tests read.
func parseWithGate(t *testing.T, args ...string) (*Options, cliflag.NamedFlagSets, error) {
	t.Helper()
	gate := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gate); err != nil {
		t.Fatal(err)
	}
	o := NewOptions(newTestCatalog(t))
	o.FeatureGate = gate
	fss := o.Flags()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, f := range fss.FlagSets {
		fs.AddFlagSet(f)
	}
	return o, fss, fs.Parse(args)
}

// TestFeatureGatesEnableTheAlphaLoggingFlags: --help offers the alpha logging flags, so --feature-gates must exist,
// list the known gates, and make those flags valid once their gate is on, as in kube-controller-manager.
func TestFeatureGatesEnableTheAlphaLoggingFlags(t *testing.T) {
	o, fss, err := parseWithGate(t)
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	cliflag.PrintSections(&help, fss, 0)
	for _, want := range []string{"--feature-gates", "LoggingAlphaOptions=true|false (ALPHA - default=false)", "--log-text-split-stream"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if errs := logsapi.Validate(o.Logs, o.FeatureGate, nil); len(errs) > 0 {
		t.Errorf("defaults: %v", errs.ToAggregate())
	}

	split := []string{"--log-text-split-stream", "--log-text-info-buffer-size=1Ki"}
	o, _, err = parseWithGate(t, split...)
	if err != nil {
		t.Fatal(err)
	}
	if errs := logsapi.Validate(o.Logs, o.FeatureGate, nil); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "LoggingAlphaOptions") {
		t.Errorf("%v without the gate: %v, want an error naming LoggingAlphaOptions", split, errs.ToAggregate())
	}
	o, _, err = parseWithGate(t, append(split, "--feature-gates=LoggingAlphaOptions=true")...)
	if err != nil {
		t.Fatal(err)
	}
	if errs := logsapi.Validate(o.Logs, o.FeatureGate, nil); len(errs) > 0 {
		t.Errorf("%v with --feature-gates=LoggingAlphaOptions=true: %v", split, errs.ToAggregate())
	}
	if _, _, err := parseWithGate(t, "--feature-gates=NoSuchGate=true"); err == nil || !strings.Contains(err.Error(), "unrecognized feature gate") {
		t.Errorf("--feature-gates=NoSuchGate=true: %v, want unrecognized", err)
	}
}

// lockedBuffer is klog's output in a test: klog writes from the goroutine that logs.
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

// captureKlog sends klog's output (text format, every severity) to a buffer until the test ends.
func captureKlog(t *testing.T) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	klog.LogToStderr(false)
	klog.SetOutput(out)
	t.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return out
}

// errorLine is a klog text line of severity Error or Fatal: "E1127 12:00:00.000000 ...".
var errorLine = regexp.MustCompile(`(?m)^[EF]\d{4} `)

// TestApplyMetricsLogsNoErrorOnACleanStart: the metrics flags at their defaults (no allow-list, no manifest) apply
// without the error-level "The manifest file is empty, ignoring." that metrics.Options.Apply logs on every start;
// a manifest that is given is still read, and its problems still said.
func TestApplyMetricsLogsNoErrorOnACleanStart(t *testing.T) {
	out := captureKlog(t)
	o, _, err := parseWithGate(t)
	if err != nil {
		t.Fatal(err)
	}
	o.ApplyMetrics()
	klog.Flush()
	if lines := errorLine.FindAllString(out.String(), -1); len(lines) > 0 {
		t.Errorf("applying the default metrics flags logged at error level:\n%s", out)
	}

	o, _, err = parseWithGate(t, "--allow-metric-labels-manifest="+t.TempDir()+"/missing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o.ApplyMetrics()
	klog.Flush()
	if !strings.Contains(out.String(), "Failed to read allow list manifest") {
		t.Errorf("a missing --allow-metric-labels-manifest was not reported; klog:\n%s", out)
	}
}
