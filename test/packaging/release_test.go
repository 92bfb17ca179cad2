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
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// releaseVersion is what the test releases: not the chart's appVersion, so that every place the version reaches is
// seen to follow VERSION, and a pre-release, the longest form a VERSION takes.
const releaseVersion = "v9.8.7-rc.1"

// releaseChangelog is the test's CHANGELOG.md: the release's section lies between two others and carries a link
// reference definition, which the notes leave out.
const releaseChangelog = `# Changelog

## [Unreleased]

- Not released yet.

## [v9.8.7-rc.1] - 2031-02-03

### Added

- Everything the test checks.

[v9.8.7-rc.1]: https://example.com/releases/v9.8.7-rc.1

## [v9.8.6] - 2031-01-01

- The release before.
`

const releaseNotes = "## [v9.8.7-rc.1] - 2031-02-03\n\n### Added\n\n- Everything the test checks.\n"

// imagePlatforms are the platforms of the release's image, and the binaries' suffixes.
var imagePlatforms = []string{"linux/amd64", "linux/arm64"}

// releaseRun is one run of hack/release.sh.
type releaseRun struct {
	dir     string    // RELEASE_OUT_DIR
	commit  string    // HEAD, what the release says it was built from
	created time.Time // HEAD's commit time
	arm64   []byte    // the stand-in arm64 binary it was given
}

// runRelease runs hack/release.sh as `make release VERSION=...` does, with the test's changelog, into a directory of
// its own. Only the amd64 binary is built from the product: compiling every package of the product for arm64 takes
// the better part of ten minutes on two cores, so a small static arm64 program stands in for it (through
// RELEASE_PREBUILT_DIR); the image builder refuses a binary of the wrong architecture, so the stand-in is a real one.
func runRelease(t *testing.T) releaseRun {
	t.Helper()
	tmp := t.TempDir()
	r := releaseRun{dir: filepath.Join(tmp, "out"), commit: git(t, "rev-parse", "HEAD")}
	epoch, err := strconv.ParseInt(git(t, "show", "-s", "--format=%ct", "HEAD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	r.created = time.Unix(epoch, 0).UTC()

	prebuilt := filepath.Join(tmp, "prebuilt")
	r.arm64 = buildArm64StandIn(t, filepath.Join(prebuilt, chartName+"-linux-arm64"))
	changelog := filepath.Join(tmp, "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(releaseChangelog), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := releaseCommand(t, releaseVersion, "RELEASE_OUT_DIR="+r.dir, "RELEASE_CHANGELOG="+changelog,
		"RELEASE_PREBUILT_DIR="+prebuilt).CombinedOutput()
	if err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, out)
	}
	t.Logf("hack/release.sh:\n%s", out)
	return r
}

func releaseCommand(t *testing.T, version string, env ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(root(t), "hack", "release.sh"))
	cmd.Env = append(os.Environ(), append([]string{"VERSION=" + version, "GIT_COMMIT=", "CA_BUNDLE="}, env...)...)
	return cmd
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", root(t)}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// buildArm64StandIn builds a static linux/arm64 program to path and returns its bytes.
func buildArm64StandIn(t *testing.T, path string) []byte {
	t.Helper()
	src := t.TempDir()
	const program = "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"arm64 stand-in\\n\") }\n"
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", path, "main.go")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the arm64 stand-in: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRelease runs the release build and checks everything it writes: the image (as an OCI layout and as docker
// tarballs), the binaries, the chart, the rendered manifests, the notes and the checksums; then builds it again
// from the same binaries and expects the same bytes.
func TestRelease(t *testing.T) {
	r := runRelease(t)
	t.Run("image layout", func(t *testing.T) { checkImageLayout(t, r) })
	t.Run("image tarballs", func(t *testing.T) { checkImageTarballs(t, r) })
	t.Run("chart", func(t *testing.T) { checkReleaseChart(t, r) })
	t.Run("manifests", func(t *testing.T) { checkReleaseManifests(t, r) })
	t.Run("notes", func(t *testing.T) {
		got, err := os.ReadFile(filepath.Join(r.dir, "CHANGELOG-"+releaseVersion+".md"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != releaseNotes {
			t.Errorf("the release notes are\n%s\nwant\n%s", got, releaseNotes)
		}
	})
	t.Run("checksums", func(t *testing.T) { checkChecksums(t, r.dir) })
	t.Run("reproducible", func(t *testing.T) {
		// The same commit and binaries give the same files, byte for byte: nothing of the run's time, user or
		// directory gets in. (Go's own builds are reproducible with -trimpath and the build date taken from the
		// commit, which hack/version.sh does with SOURCE_DATE_EPOCH.)
		prebuilt := t.TempDir()
		for _, platform := range imagePlatforms {
			name := chartName + "-" + strings.ReplaceAll(platform, "/", "-")
			copyFile(t, filepath.Join(r.dir, name), filepath.Join(prebuilt, name))
		}
		changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
		if err := os.WriteFile(changelog, []byte(releaseChangelog), 0o644); err != nil {
			t.Fatal(err)
		}
		again := filepath.Join(t.TempDir(), "again")
		out, err := releaseCommand(t, releaseVersion, "RELEASE_OUT_DIR="+again, "RELEASE_CHANGELOG="+changelog,
			"RELEASE_PREBUILT_DIR="+prebuilt).CombinedOutput()
		if err != nil {
			t.Fatalf("hack/release.sh, again: %v\n%s", err, out)
		}
		first, err := os.ReadFile(filepath.Join(r.dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		second, err := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("a second release of the same commit differs:\nfirst:\n%s\nsecond:\n%s", first, second)
		}
	})
}

// TestReleaseRefusesBadInput: a release with no VERSION, a VERSION that is not v<semver> (build metadata cannot be
// an image tag), a version the changelog has no section for, or an output directory holding something else stops
// before building anything, saying what to do.
func TestReleaseRefusesBadInput(t *testing.T) {
	changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(releaseChangelog), 0o644); err != nil {
		t.Fatal(err)
	}
	notRelease := t.TempDir()
	precious := filepath.Join(notRelease, "precious")
	if err := os.WriteFile(precious, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version, outDir, want string
	}{
		{"", "", "VERSION is required"},
		{"0.1.0", "", "is not v<major>.<minor>.<patch>"},
		{"v0.1", "", "is not v<major>.<minor>.<patch>"},
		{"v1.2.3+build.5", "", "is not v<major>.<minor>.<patch>"},
		{"v01.2.3", "", "is not v<major>.<minor>.<patch>"},
		{"v9.9.9", "", "has no section for v9.9.9"},
		{releaseVersion, notRelease, "holds no earlier release"},
	} {
		outDir := tc.outDir
		if outDir == "" {
			outDir = filepath.Join(t.TempDir(), "out")
		}
		out, err := releaseCommand(t, tc.version, "RELEASE_OUT_DIR="+outDir, "RELEASE_CHANGELOG="+changelog).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("VERSION=%q RELEASE_OUT_DIR=%s: hack/release.sh returned %v, want an error saying %q:\n%s",
				tc.version, outDir, err, tc.want, out)
		}
		if strings.Contains(string(out), "go build") {
			t.Errorf("VERSION=%q: hack/release.sh started building before refusing:\n%s", tc.version, out)
		}
	}
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("hack/release.sh touched a directory that was not a release's: %v", err)
	}
}

// The OCI image layout, as far as the test reads it.
type (
	ociDescriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
		Platform    *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	ociIndex struct {
		MediaType   string            `json:"mediaType"`
		Manifests   []ociDescriptor   `json:"manifests"`
		Annotations map[string]string `json:"annotations"`
	}
	ociManifest struct {
		MediaType   string            `json:"mediaType"`
		Config      ociDescriptor     `json:"config"`
		Layers      []ociDescriptor   `json:"layers"`
		Annotations map[string]string `json:"annotations"`
	}
	imageConfig struct {
		OS           string    `json:"os"`
		Architecture string    `json:"architecture"`
		Created      time.Time `json:"created"`
		Config       struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
	}
)

const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	binaryInImage   = "usr/local/bin/" + chartName
	caBundleInImage = "etc/ssl/certs/ca-certificates.crt"
)

// wantLabels are the OCI labels of the image, and the annotations of its manifests and index.
func (r releaseRun) wantLabels(t *testing.T) map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":    chartName,
		"org.opencontainers.image.version":  releaseVersion,
		"org.opencontainers.image.revision": r.commit,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  r.created.Format(time.RFC3339),
	}
	// The chart names no repository yet (Chart.yaml `sources`): the placeholder is the Go module's path.
	labels["org.opencontainers.image.source"] = "https://github.com/multiproject/multiproject-controller-manager"
	if c := loadChart(t); len(c.Metadata.Sources) > 0 {
		labels["org.opencontainers.image.source"] = c.Metadata.Sources[0]
	} else if c.Metadata.Home != "" {
		labels["org.opencontainers.image.source"] = c.Metadata.Home
	}
	return labels
}

// readBlob reads a blob of the layout and checks it against its descriptor's digest and size.
func readBlob(t *testing.T, layout string, d ociDescriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s: sha256 %x and size %d, want the digest and size %d", d.Digest, sum, len(data), d.Size)
	}
	return data
}

func decodeJSON(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, data)
	}
}

// layerFile is a file or directory of an image's layers.
type layerFile struct {
	header *tar.Header
	data   []byte
}

// readLayers unpacks gzip-compressed tar layers, later layers over earlier ones.
func readLayers(t *testing.T, layers ...[]byte) map[string]layerFile {
	t.Helper()
	files := map[string]layerFile{}
	for _, l := range layers {
		zr, err := gzip.NewReader(bytes.NewReader(l))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(h.Name, "/")] = layerFile{header: h, data: data}
		}
	}
	return files
}

// checkImageLayout reads the OCI layout image/: its index.json names the release's index by the version; the index
// holds one image per platform; each image has the config, the labels and the files a manager needs.
func checkImageLayout(t *testing.T, r releaseRun) {
	layout := filepath.Join(r.dir, "image")
	labels := r.wantLabels(t)
	indexJSON, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top ociIndex
	decodeJSON(t, "image/index.json", indexJSON, &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != ociIndexType ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != releaseVersion {
		t.Fatalf("image/index.json should name one image index, %s, by its version:\n%s", releaseVersion, indexJSON)
	}
	var index ociIndex
	decodeJSON(t, "the image index", readBlob(t, layout, top.Manifests[0]), &index)
	if d := diffValue(labels, index.Annotations); d != "" {
		t.Errorf("the index's annotations differ (-want +got):\n%s", d)
	}
	var platforms []string
	for _, m := range index.Manifests {
		if m.Platform == nil {
			t.Fatalf("the index's manifest %s names no platform", m.Digest)
		}
		platform := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, platform)
		t.Run(platform, func(t *testing.T) { checkPlatformImage(t, r, layout, m, platform, labels) })
	}
	if d := diffValue(imagePlatforms, platforms); d != "" {
		t.Errorf("the index's platforms differ (-want +got):\n%s", d)
	}
}

func checkPlatformImage(t *testing.T, r releaseRun, layout string, desc ociDescriptor, platform string, labels map[string]string) {
	if desc.MediaType != ociManifestType {
		t.Errorf("the manifest's media type is %q, want %q", desc.MediaType, ociManifestType)
	}
	var manifest ociManifest
	decodeJSON(t, "the manifest", readBlob(t, layout, desc), &manifest)
	if d := diffValue(labels, manifest.Annotations); d != "" {
		t.Errorf("the manifest's annotations differ (-want +got):\n%s", d)
	}
	var config imageConfig
	decodeJSON(t, "the config", readBlob(t, layout, manifest.Config), &config)
	if got := config.OS + "/" + config.Architecture; got != platform {
		t.Errorf("the config's platform is %s, want %s", got, platform)
	}
	if !config.Created.Equal(r.created) {
		t.Errorf("the config's created is %s, want the commit's time %s", config.Created, r.created)
	}
	if config.Config.User != "65532:65532" {
		t.Errorf("the config's User is %q, want 65532:65532 (nonroot, as manifests/deployment.yaml runs it)", config.Config.User)
	}
	if d := diffValue([]string{"/" + binaryInImage}, config.Config.Entrypoint); d != "" {
		t.Errorf("the config's Entrypoint differs (-want +got):\n%s", d)
	}
	if d := diffValue(labels, config.Config.Labels); d != "" {
		t.Errorf("the config's labels differ (-want +got):\n%s", d)
	}

	var layers [][]byte
	for _, l := range manifest.Layers {
		layers = append(layers, readBlob(t, layout, l))
	}
	files := readLayers(t, layers...)
	checkImageFiles(t, r, files)
	binary, ok := files[binaryInImage]
	if !ok {
		t.Fatalf("no %s in the image", binaryInImage)
	}
	built, err := os.ReadFile(filepath.Join(r.dir, chartName+"-"+strings.ReplaceAll(platform, "/", "-")))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(binary.data, built) {
		t.Errorf("the image's binary is not the release's %s binary", platform)
	}
	switch platform {
	case "linux/amd64":
		checkImageBinaryRuns(t, r, binary.data)
	case "linux/arm64":
		if !bytes.Equal(binary.data, r.arm64) {
			t.Errorf("the arm64 image's binary is not the one the release was given")
		}
		f, err := elf.NewFile(bytes.NewReader(binary.data))
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != elf.EM_AARCH64 {
			t.Errorf("the arm64 image's binary is built for %s", f.Machine)
		}
	}
}

// checkImageFiles: the CA bundle TLS to Compute Engine needs, the user nonroot, every entry dated with the commit
// and owned by root but nonroot's home.
func checkImageFiles(t *testing.T, r releaseRun, files map[string]layerFile) {
	bundle, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	if ca, ok := files[caBundleInImage]; !ok || !bytes.Equal(ca.data, bundle) {
		t.Errorf("%s in the image is not the CA bundle of Debian's ca-certificates", caBundleInImage)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "\nnonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"].data), "\nnonroot:x:65532:") {
		t.Errorf("/etc/passwd and /etc/group name no nonroot user and group 65532:\n%s\n%s",
			files["etc/passwd"].data, files["etc/group"].data)
	}
	if mode := files[binaryInImage].header.Mode; mode != 0o755 {
		t.Errorf("%s has mode %o, want 755", binaryInImage, mode)
	}
	for name, f := range files {
		if !f.header.ModTime.Equal(r.created) {
			t.Errorf("%s is dated %s, want the commit's time %s", name, f.header.ModTime, r.created)
		}
		wantOwner := 0
		if name == "home/nonroot" {
			wantOwner = 65532
		}
		if f.header.Uid != wantOwner || f.header.Gid != wantOwner {
			t.Errorf("%s is owned by %d:%d, want %d:%d", name, f.header.Uid, f.header.Gid, wantOwner, wantOwner)
		}
	}
}

// checkImageBinaryRuns runs the amd64 image's binary: it says the release's version and commit.
func checkImageBinaryRuns(t *testing.T, r releaseRun, binary []byte) {
	path := filepath.Join(t.TempDir(), chartName)
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("the image's binary --version: %v\n%s", err, got)
	}
	if want := chartName + " " + releaseVersion + "\n"; string(got) != want {
		t.Errorf("the image's binary --version printed %q, want %q", got, want)
	}
	raw, err := exec.Command(path, "--version=raw").CombinedOutput()
	if err != nil {
		t.Fatalf("the image's binary --version=raw: %v\n%s", err, raw)
	}
	for _, want := range []string{`GitCommit:"` + r.commit + `"`, `BuildDate:"` + r.created.Format(time.RFC3339) + `"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("--version=raw printed %s, want %s in it", raw, want)
		}
	}
}

// checkImageTarballs: each platform's docker tarball holds that platform's image of the layout, tagged with the
// version, as `docker load` wants it.
func checkImageTarballs(t *testing.T, r releaseRun) {
	layout := filepath.Join(r.dir, "image")
	configs := map[string]string{} // platform -> config digest in the layout
	var top, index ociIndex
	data, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, "image/index.json", data, &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("image/index.json names %d manifests, want 1", len(top.Manifests))
	}
	decodeJSON(t, "the image index", readBlob(t, layout, top.Manifests[0]), &index)
	for _, m := range index.Manifests {
		var manifest ociManifest
		decodeJSON(t, "a manifest", readBlob(t, layout, m), &manifest)
		configs[m.Platform.OS+"/"+m.Platform.Architecture] = manifest.Config.Digest
	}
	for _, platform := range imagePlatforms {
		name := fmt.Sprintf("%s-%s-%s.tar", chartName, releaseVersion, strings.ReplaceAll(platform, "/", "-"))
		f, err := os.Open(filepath.Join(r.dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		entries := map[string][]byte{}
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if h.Name == "manifest.json" {
				entries[h.Name], _ = io.ReadAll(tr)
			} else {
				entries[h.Name] = nil
			}
		}
		_ = f.Close()
		var manifest []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		decodeJSON(t, name+": manifest.json", entries["manifest.json"], &manifest)
		if len(manifest) != 1 {
			t.Fatalf("%s holds %d images, want 1", name, len(manifest))
		}
		m := manifest[0]
		if want := []string{chartName + ":" + releaseVersion}; fmt.Sprint(m.RepoTags) != fmt.Sprint(want) {
			t.Errorf("%s is tagged %v, want %v", name, m.RepoTags, want)
		}
		if m.Config != configs[platform] {
			t.Errorf("%s holds the config %s, the layout's %s image %s", name, m.Config, platform, configs[platform])
		}
		for _, file := range append([]string{m.Config}, m.Layers...) {
			if _, ok := entries[file]; !ok {
				t.Errorf("%s has no %s, which its manifest.json names", name, file)
			}
		}
	}
}

// checkReleaseChart: the packaged chart is versioned by the release, installs the release's image by default, and
// otherwise renders what the chart in the repository renders; its archive is dated with the commit.
func checkReleaseChart(t *testing.T, r releaseRun) {
	archive := filepath.Join(r.dir, chartName+"-"+strings.TrimPrefix(releaseVersion, "v")+".tgz")
	c := loadChartDir(t, archive)
	if c.Metadata.Version != strings.TrimPrefix(releaseVersion, "v") || c.Metadata.AppVersion != releaseVersion {
		t.Errorf("the packaged chart's version and appVersion are %s and %s, want %s and %s",
			c.Metadata.Version, c.Metadata.AppVersion, strings.TrimPrefix(releaseVersion, "v"), releaseVersion)
	}
	got, err := helmTemplateChart(t, c, defaultNamespace, nil)
	if err != nil {
		t.Fatalf("helm template of the packaged chart: %v", err)
	}
	want := mustHelmTemplate(t, defaultNamespace, nil)
	setManagerImage(t, want, chartName+":"+releaseVersion)
	diffObjects(t, "the chart, image tag "+releaseVersion, want, "the packaged chart", got)

	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range readLayers(t, data) {
		if !f.header.ModTime.Equal(r.created) {
			t.Errorf("%s in the chart archive is dated %s, want the commit's time %s", name, f.header.ModTime, r.created)
		}
	}
}

// checkReleaseManifests: the rendered manifests are the kustomize base with the release's image.
func checkReleaseManifests(t *testing.T, r releaseRun) {
	f, err := os.Open(filepath.Join(r.dir, chartName+"-"+releaseVersion+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := framework.DecodeManifests(f)
	if err != nil {
		t.Fatalf("the release's manifests: %v", err)
	}
	want := kustomizeBuild(t, "manifests")
	setManagerImage(t, want, chartName+":"+releaseVersion)
	diffObjects(t, "kustomize build manifests, image "+releaseVersion, want, "the release's manifests", got)
}

// setManagerImage sets the image of the manager's container in the Deployment among objects.
func setManagerImage(t *testing.T, objects []*unstructured.Unstructured, image string) {
	t.Helper()
	deployment := find(t, objects, "Deployment", chartName)
	containers, _, err := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) != 1 {
		t.Fatalf("the Deployment should have one container: %v", err)
	}
	containers[0].(map[string]any)["image"] = image
	if err := unstructured.SetNestedSlice(deployment.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// checkChecksums: SHA256SUMS lists every other file of the release, by its path relative to the release directory,
// with its SHA-256 (what `sha256sum -c SHA256SUMS` checks).
func checkChecksums(t *testing.T, dir string) {
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^([0-9a-f]{64})  ([^/].*)$`)
	listed := map[string]bool{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		m := line.FindStringSubmatch(scanner.Text())
		if m == nil {
			t.Errorf("SHA256SUMS: %q is not \"<sha256>  <relative path>\"", scanner.Text())
			continue
		}
		listed[m[2]] = true
		data, err := os.ReadFile(filepath.Join(dir, m[2]))
		if err != nil {
			t.Errorf("SHA256SUMS lists %s: %v", m[2], err)
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != m[1] {
			t.Errorf("SHA256SUMS says %s of %s, it is %x", m[1], m[2], sum)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	var unlisted []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err == nil && rel != "SHA256SUMS" && !listed[rel] {
			unlisted = append(unlisted, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(unlisted)
	if len(unlisted) > 0 {
		t.Errorf("SHA256SUMS leaves out %v", unlisted)
	}
	for _, want := range []string{
		chartName + "-linux-amd64", chartName + "-linux-arm64", "image/index.json", "image/oci-layout",
		chartName + "-" + releaseVersion + "-linux-amd64.tar", chartName + "-" + releaseVersion + "-linux-arm64.tar",
		chartName + "-" + strings.TrimPrefix(releaseVersion, "v") + ".tgz", chartName + "-" + releaseVersion + ".yaml",
		"CHANGELOG-" + releaseVersion + ".md",
	} {
		if !listed[want] {
			t.Errorf("the release has no %s", want)
		}
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestDockerfileBaseImagesArePinned: the Dockerfile, for those with a container engine, names its base images by
// version: Go's by the patch release of the Go that go.mod's go line names the minor of, distroless' by a tag that
// is not latest. And its .dockerignore keeps what hack/version.sh reads (.git for a version from git, the chart's
// appVersion between releases).
func TestDockerfileBaseImagesArePinned(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?$`).FindSubmatch(goMod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	var images []string
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && strings.EqualFold(fields[0], "FROM") {
			images = append(images, fields[1])
		}
	}
	golang := regexp.MustCompile(`^golang:` + regexp.QuoteMeta(string(goLine[1])) + `\.\d+$`)
	distroless := regexp.MustCompile(`^gcr\.io/distroless/static-debian\d+:[a-z0-9.-]+$`)
	if len(images) != 2 || !golang.MatchString(images[0]) || !distroless.MatchString(images[1]) ||
		strings.HasSuffix(images[1], ":latest") {
		t.Errorf("the Dockerfile's base images are %v, want golang:%s.<patch> and gcr.io/distroless/static-debianN:<tag, not latest>",
			images, goLine[1])
	}

	ignore, err := os.ReadFile(filepath.Join(root(t), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(ignore), "\n") {
		pattern := strings.TrimSpace(line)
		if pattern == "" || strings.HasPrefix(pattern, "#") || strings.HasPrefix(pattern, "!") {
			continue
		}
		for _, needed := range []string{".git/HEAD", "hack/version.sh", "charts/multiproject-controller-manager/Chart.yaml", "go.mod", "staging/src", "cmd/multiproject-controller-manager/main.go"} {
			for p := needed; p != "." && p != "/"; p = filepath.Dir(p) {
				if ok, _ := filepath.Match(strings.Trim(pattern, "/"), p); ok {
					t.Errorf(".dockerignore's %q leaves %s out of the build context", pattern, needed)
				}
			}
		}
	}
}
