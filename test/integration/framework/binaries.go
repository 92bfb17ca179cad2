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

package framework

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDirEnv names the environment variable that points at a directory holding etcd, kube-apiserver and
// kube-controller-manager. hack/test-integration.sh sets it; without it the framework runs
// hack/build-controlplane.sh, which builds the binaries once and caches them outside the clone.
const BinDirEnv = "CONTROLPLANE_BIN_DIR"

const (
	etcdBinary              = "etcd"
	apiServerBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
)

// buildScript is the repository-relative path of the script that builds and caches the control-plane binaries.
const buildScript = "hack/build-controlplane.sh"

// FindRepoRoot walks up from the working directory (a test binary runs in its package directory) to the directory
// that holds both go.mod and hack/build-controlplane.sh, so tests can find the manifests and scripts of the
// repository wherever they are run from.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, buildScript)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no directory above the working directory holds go.mod and %s", buildScript)
		}
		dir = parent
	}
}

// findBinaries returns the directory holding the named binaries: the one from $CONTROLPLANE_BIN_DIR when it is set
// (and then it must hold all of them, so a wrong setting is reported rather than silently rebuilt), else the cache
// directory that hack/build-controlplane.sh prints after building whatever is missing. The script's progress goes
// to progress, because a cold build takes many minutes and a silent wait looks like a hang.
func findBinaries(repoRoot string, names []string, progress io.Writer) (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if err := checkBinaries(dir, names); err != nil {
			return "", fmt.Errorf("$%s=%s: %w (unset it to build them with %s)", BinDirEnv, dir, err, buildScript)
		}
		return dir, nil
	}

	fmt.Fprintf(progress, "framework: $%s is not set; running %s (a cold build takes 10+ minutes)\n", BinDirEnv, buildScript)
	cmd := exec.Command("bash", filepath.Join(repoRoot, buildScript))
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CONTROLPLANE_COMPONENTS="+strings.Join(names, " "))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s failed: %w (set $%s to a directory holding %s to use prebuilt binaries)",
			buildScript, err, BinDirEnv, strings.Join(names, ", "))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if err := checkBinaries(dir, names); err != nil {
		return "", fmt.Errorf("%s printed %q: %w", buildScript, dir, err)
	}
	return dir, nil
}

func checkBinaries(dir string, names []string) error {
	var errs []error
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("no %s: %w", name, err))
		case info.IsDir() || info.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not an executable file", name))
		}
	}
	return errors.Join(errs...)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
