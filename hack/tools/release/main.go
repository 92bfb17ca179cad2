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

// Command release builds the parts of a release that need more than the Go toolchain, for hack/release.sh, which
// builds the binaries and calls it once per part:
//
//	release image -out DIR -version V -revision C -created T -source URL -ca-bundle FILE \
//	    -binary linux/amd64=FILE -binary linux/arm64=FILE
//	    the OCI image: an index over one image per platform, written as an OCI layout (DIR/image) and as one
//	    docker-format tarball per platform (DIR/multiproject-controller-manager-V-linux-ARCH.tar), with no
//	    container engine and no registry (github.com/google/go-containerregistry)
//	release chart -out DIR -chart CHARTDIR -version V -created T
//	    `helm package --version V-without-v --app-version V` of the chart, with every archive entry dated T
//	release manifests -out FILE -dir MANIFESTS -image NAME:TAG
//	    `kustomize build` of the kustomize base with the manager's image set to NAME:TAG
//
// It is a module of its own (like hack/tools/codegen) so that go-containerregistry, Helm and kustomize stay out of
// the product's go.mod. Every output depends only on its inputs: no clock, no user, no host name, so the same
// commit gives the same digests.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// product is the name of the binary, its image and its chart.
const product = "multiproject-controller-manager"

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: release image|chart|manifests [flags]"))
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "image":
		err = imageCommand(args)
	case "chart":
		err = chartCommand(args)
	case "manifests":
		err = manifestsCommand(args)
	default:
		err = fmt.Errorf("unknown command %q: want image, chart or manifests", cmd)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "release: %v\n", err)
	os.Exit(1)
}

// binaryFlags collects -binary OS/ARCH=FILE, in the order given.
type binaryFlags []platformBinary

type platformBinary struct {
	os, arch, path string
}

func (b *binaryFlags) String() string { return fmt.Sprint(*b) }

func (b *binaryFlags) Set(value string) error {
	platform, path, ok := strings.Cut(value, "=")
	goos, arch, ok2 := strings.Cut(platform, "/")
	if !ok || !ok2 || goos == "" || arch == "" || path == "" {
		return fmt.Errorf("want OS/ARCH=FILE, got %q", value)
	}
	*b = append(*b, platformBinary{os: goos, arch: arch, path: path})
	return nil
}

func imageCommand(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	var opts imageOptions
	var created string
	fs.StringVar(&opts.outDir, "out", "", "release directory: the OCI layout goes to OUT/image, the tarballs into OUT")
	fs.StringVar(&opts.version, "version", "", "the release version (v1.2.3); the image's tag and version label")
	fs.StringVar(&opts.revision, "revision", "", "the git commit the release is built from")
	fs.StringVar(&created, "created", "", "the commit time, RFC 3339: the image's creation time and every file's")
	fs.StringVar(&opts.source, "source", "", "the repository URL, for the org.opencontainers.image.source label")
	fs.StringVar(&opts.caBundle, "ca-bundle", "", "the CA certificate bundle to put at "+caBundlePath)
	fs.Var(&opts.binaries, "binary", "OS/ARCH=FILE, a static binary per platform (repeat)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if opts.created, err = parseCreated(created); err != nil {
		return err
	}
	for _, f := range []struct{ flag, value string }{
		{"out", opts.outDir}, {"version", opts.version}, {"revision", opts.revision}, {"source", opts.source},
		{"ca-bundle", opts.caBundle},
	} {
		if f.value == "" {
			return fmt.Errorf("image: -%s is required", f.flag)
		}
	}
	if len(opts.binaries) == 0 {
		return fmt.Errorf("image: no -binary given")
	}
	return writeImage(opts)
}

func chartCommand(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ExitOnError)
	outDir := fs.String("out", "", "directory to write NAME-VERSION.tgz into")
	chartDir := fs.String("chart", "", "the chart's directory")
	version := fs.String("version", "", "the release version (v1.2.3): the appVersion, and without the v the chart's version")
	created := fs.String("created", "", "the commit time, RFC 3339: every archive entry's modification time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t, err := parseCreated(*created)
	if err != nil {
		return err
	}
	if *outDir == "" || *chartDir == "" || *version == "" {
		return fmt.Errorf("chart: -out, -chart and -version are required")
	}
	path, err := packageChart(*chartDir, *version, t, *outDir)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}

func manifestsCommand(args []string) error {
	fs := flag.NewFlagSet("manifests", flag.ExitOnError)
	out := fs.String("out", "", "the file to write the rendered manifests to")
	dir := fs.String("dir", "", "the kustomize base (manifests/)")
	image := fs.String("image", "", "NAME:TAG the manager's image becomes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *dir == "" || *image == "" {
		return fmt.Errorf("manifests: -out, -dir and -image are required")
	}
	return renderManifests(*dir, *image, *out)
}

func parseCreated(value string) (time.Time, error) {
	if value == "" {
		return time.Time{}, fmt.Errorf("-created is required")
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("-created: %w", err)
	}
	return t.UTC(), nil
}
