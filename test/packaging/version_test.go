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

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfileBuild returns the build arguments the Dockerfile declares and its RUN line that builds the binary.
func dockerfileBuild(t *testing.T) (args []string, run string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 2 && fields[0] == "ARG":
			args = append(args, strings.SplitN(fields[1], "=", 2)[0])
		case len(fields) >= 2 && fields[0] == "RUN" && strings.Contains(line, "go build"):
			if run != "" {
				t.Fatalf("the Dockerfile has more than one RUN ... go build line:\n%s\n%s", run, line)
			}
			run = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "RUN"))
		}
	}
	if run == "" {
		t.Fatal("the Dockerfile has no RUN ... go build line")
	}
	return args, run
}

// TestDockerfileBuildStampsTheVersion runs the Dockerfile's `go build` line as `docker build --build-arg VERSION=...
// --build-arg GIT_COMMIT=...` would (there is no Docker engine on the development machines): the build arguments
// become the RUN line's environment, the line runs under /bin/sh -c in the source tree, and only its output
// directory, /out in the image, is the test's own. The binary it builds must report the version it was given, under
// its own program name, so the image never says v0.0.0-master+$Format:%H$ again.
func TestDockerfileBuildStampsTheVersion(t *testing.T) {
	const version, commit = "v9.8.7", "0123456789abcdef0123456789abcdef01234567"
	args, run := dockerfileBuild(t)
	for _, want := range []string{"VERSION", "GIT_COMMIT"} {
		if !strings.Contains(" "+strings.Join(args, " ")+" ", " "+want+" ") {
			t.Errorf("the Dockerfile declares the build arguments %v, want %s among them", args, want)
		}
	}
	const imageOut = " /out/"
	if !strings.Contains(run, imageOut) {
		t.Fatalf("the Dockerfile's build line does not write into /out/: %s", run)
	}
	out := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(run, imageOut, " "+out+"/"))
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "VERSION="+version, "GIT_COMMIT="+commit)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build line failed: %v\n%s\n%s", err, run, output)
	}
	binary := filepath.Join(out, "multiproject-controller-manager")

	got, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", binary, err, got)
	}
	if want := "multiproject-controller-manager " + version + "\n"; string(got) != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
	raw, err := exec.Command(binary, "--version=raw").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version=raw: %v\n%s", binary, err, raw)
	}
	for _, want := range []string{`GitVersion:"` + version + `"`, `GitCommit:"` + commit + `"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("--version=raw printed %s, want %s in it", raw, want)
		}
	}
	if strings.Contains(string(raw), `BuildDate:"1970-01-01T00:00:00Z"`) {
		t.Errorf("--version=raw printed %s: no build date stamped", raw)
	}

	// The feature gates are Kubernetes', versioned by its releases: a stamped version of ours must not become the
	// version they are evaluated at (at "9.8" every gate would be PreAlpha, unlisted and refused).
	help, _ := exec.Command(binary, "--help").CombinedOutput()
	if !strings.Contains(string(help), "LoggingAlphaOptions=true|false (ALPHA - default=false)") {
		t.Errorf("--help of a binary stamped %s does not list the gate LoggingAlphaOptions:\n%s", version, help)
	}
	if out, err := exec.Command(binary, "--feature-gates=LoggingAlphaOptions=true", "--version").CombinedOutput(); err != nil {
		t.Errorf("--feature-gates=LoggingAlphaOptions=true refused by a binary stamped %s: %v\n%s", version, err, out)
	}
}

// TestVersionBetweenReleasesFollowsTheChart: without VERSION, hack/version.sh (which the Makefile and the Dockerfile
// call) derives the version from the chart's appVersion, the release the chart's default image tag names, unless
// HEAD carries a release tag; and it refuses a version component-base could not parse.
func TestVersionBetweenReleasesFollowsTheChart(t *testing.T) {
	script := filepath.Join(root(t), "hack", "version.sh")
	cmd := exec.Command(script, "--version")
	cmd.Env = append(os.Environ(), "VERSION=", "GIT_COMMIT=")
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/version.sh --version: %v", err)
	}
	appVersion := loadChart(t).Metadata.AppVersion
	tagged := exec.Command("git", "-C", root(t), "describe", "--tags", "--exact-match", "--match", "v*", "HEAD").Run() == nil
	between := regexp.MustCompile(`^` + regexp.QuoteMeta(appVersion) + `-dev\+[0-9a-f]{12}(\.dirty)?\n$`)
	if !tagged && !between.Match(got) {
		t.Errorf("hack/version.sh --version printed %q, want %s-dev+<commit>", got, appVersion)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(appVersion) {
		t.Errorf("the chart's appVersion %q is not a release version v<major>.<minor>.<patch>", appVersion)
	}

	bad := exec.Command(script)
	bad.Env = append(os.Environ(), "VERSION=latest")
	if out, err := bad.CombinedOutput(); err == nil {
		t.Errorf("hack/version.sh accepted VERSION=latest and printed %s", out)
	}
}
