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

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// errorLogLine is a klog text line of severity Error or Fatal: "E1127 12:00:00.000000 ...".
var errorLogLine = regexp.MustCompile(`(?m)^[EF]\d{4} .*$`)

// TestBuiltBinaryReportsItsVersion: the binary built as `make build` builds it (hack/version.sh's ldflags) reports
// the stamped version under its own name for --version, in its "Starting" line, in the User-Agent of every Compute
// Engine call and in kubernetes_build_info; it runs with --feature-gates=LoggingAlphaOptions=true and an alpha
// logging flag, exporting the gate's state and how many controllers run; and a clean start that converges a tenant
// logs no error-level line (the metrics options used to log "The manifest file is empty, ignoring." at error level
// on every start).
func TestBuiltBinaryReportsItsVersion(t *testing.T) {
	binary := managerBinary(t)
	out, err := exec.Command(filepath.Join(controlPlane.RepoRoot(), "hack", "version.sh"), "--version").Output()
	if err != nil {
		t.Fatalf("hack/version.sh --version: %v", err)
	}
	version := strings.TrimSpace(string(out))
	got, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, got)
	}
	if want := "multiproject-controller-manager " + version + "\n"; string(got) != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}

	resetLease(t)
	var mu sync.Mutex
	agents := sets.New[string]()
	gce := fakegce.New(fakegce.Options{OnCall: func(r fakegce.CallRecord) {
		mu.Lock()
		defer mu.Unlock()
		agents.Insert(r.UserAgent)
	}})
	gce.Start()
	t.Cleanup(gce.Close)
	w := newWorkload(t, gce)
	w.setService("web", w.endpoints(1, 0, 1))
	w.setIngress("web", "web.version.example.com")
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	// The alpha logging flags work once their gate is on (errors to stderr, the rest to stdout: one log file here).
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le,
		"--feature-gates=LoggingAlphaOptions=true", "--log-text-split-stream")
	w.waitConverged("one tenant, on a clean start")

	client := adminHTTPClient(t)
	defer client.CloseIdleConnections()
	exported := scrape(t, client, m)
	if s := exported["kubernetes_build_info"]; len(s) != 1 || string(s[0].Metric["git_version"]) != version {
		t.Errorf("kubernetes_build_info = %v, want git_version=%q", s, version)
	}
	if s := exported["multiproject_controllers_enabled"]; len(s) != 1 || s[0].Value != 3 {
		t.Errorf("multiproject_controllers_enabled = %v, want 3 (--controllers=*)", s)
	}
	gates := map[string]float64{}
	for _, s := range exported["kubernetes_feature_enabled"] {
		gates[string(s.Metric["name"])] = float64(s.Value)
	}
	if gates["LoggingAlphaOptions"] != 1 {
		t.Errorf("kubernetes_feature_enabled{name=LoggingAlphaOptions} = %v, want 1 (gates: %v)", gates["LoggingAlphaOptions"], gates)
	}

	mu.Lock()
	defer mu.Unlock()
	if agents.Len() == 0 {
		t.Fatal("the fake GCE saw no call")
	}
	for agent := range agents {
		if !strings.Contains(agent, "multiproject-controller-manager/"+version+" (") {
			t.Errorf("a Compute Engine call's User-Agent is %q, want multiproject-controller-manager/%s in it", agent, version)
		}
	}
	log, err := os.ReadFile(m.logPath)
	if err != nil {
		t.Fatal(err)
	}
	starting := regexp.MustCompile(`(?m)^I\d{4} .*"Starting" component="multiproject-controller-manager" version="([^"]*)"`).FindSubmatch(log)
	if starting == nil || string(starting[1]) != version {
		t.Errorf("the Starting line %q, want version=%q in it", starting, version)
	}
	if lines := errorLogLine.FindAll(log, -1); len(lines) > 0 {
		t.Errorf("a clean start logged %d error-level line(s):\n%s", len(lines), lines)
	}
}
