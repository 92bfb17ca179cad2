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

package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	binaryPath   = "/usr/local/bin/" + product
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// nonroot is the user and group the manager runs as: distroless' "nonroot", and the runAsUser of
	// manifests/deployment.yaml and the chart.
	nonroot = 65532
)

// The user and group databases of the image, as distroless writes them: the manager runs as nonroot, and
// nothing looks the names up but tools an operator might copy in to debug.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// elfMachine is the ELF machine a binary for each supported architecture must be built for.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

type imageOptions struct {
	outDir, version, revision, source, caBundle string
	created                                     time.Time
	binaries                                    binaryFlags
}

// labels are the image's OCI labels, also its manifests' and its index's annotations.
func (o imageOptions) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    product,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.source":   o.source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
	}
}

// writeImage writes the image index over one image per platform as an OCI layout in OUT/image, whose index.json
// names the index with the version (org.opencontainers.image.ref.name), and each platform's image as a
// docker-format tarball tagged product:version (what `docker load` and `crane push` take; a docker tarball holds
// images, not an index).
func writeImage(o imageOptions) error {
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return fmt.Errorf("the CA certificate bundle: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return fmt.Errorf("the CA certificate bundle %s holds no PEM certificate", o.caBundle)
	}
	base, err := layer(baseEntries(ca), o.created)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(product + ":" + o.version)
	if err != nil {
		return fmt.Errorf("the image's tag: %w", err)
	}

	var adds []mutate.IndexAddendum
	for _, b := range o.binaries {
		img, err := platformImage(o, base, b)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", b.os, b.arch, err)
		}
		file := filepath.Join(o.outDir, fmt.Sprintf("%s-%s-%s-%s.tar", product, o.version, b.os, b.arch))
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			return fmt.Errorf("%s/%s: writing %s: %w", b.os, b.arch, file, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("image %s/%s: %s\n", b.os, b.arch, digest)
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.os, Architecture: b.arch}},
		})
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	index = mutate.AppendManifests(index, adds...)
	index = mutate.Annotations(index, o.labels()).(v1.ImageIndex)

	path, err := layout.Write(filepath.Join(o.outDir, "image"), empty.Index)
	if err != nil {
		return err
	}
	if err := path.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.version,
	})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	digest, err := index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image index: %s\n", digest)
	return nil
}

// platformImage is one platform's image: the base layer, then the binary's layer, on nothing (empty.Image).
func platformImage(o imageOptions, base v1.Layer, b platformBinary) (v1.Image, error) {
	data, err := checkBinary(b)
	if err != nil {
		return nil, err
	}
	bin, err := layer([]entry{{name: binaryPath[1:], mode: 0o755, data: data}}, o.created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS:           b.os,
		Architecture: b.arch,
		Created:      v1.Time{Time: o.created},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
			Entrypoint: []string{binaryPath},
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			WorkingDir: "/",
			Labels:     o.labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{
			Created:   v1.Time{Time: o.created},
			CreatedBy: "hack/release.sh: /etc/passwd, /etc/group, " + caBundlePath + ", /home/nonroot, /tmp",
		}},
		mutate.Addendum{Layer: bin, History: v1.History{
			Created:   v1.Time{Time: o.created},
			CreatedBy: "hack/release.sh: " + binaryPath + " (" + b.os + "/" + b.arch + ")",
		}},
	)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.labels()).(v1.Image), nil
}

// checkBinary reads a platform's binary and refuses one built for another architecture or linked dynamically:
// the image has no C library and no loader.
func checkBinary(b platformBinary) ([]byte, error) {
	want, ok := elfMachine[b.arch]
	if b.os != "linux" || !ok {
		return nil, fmt.Errorf("unsupported platform (linux/amd64 and linux/arm64 are)")
	}
	data, err := os.ReadFile(b.path)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF binary: %w", b.path, err)
	}
	defer f.Close()
	if f.Machine != want {
		return nil, fmt.Errorf("%s is built for %s, not %s", b.path, f.Machine, b.arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is linked dynamically (build it with CGO_ENABLED=0)", b.path)
		}
	}
	return data, nil
}

// entry is a file or directory of a layer. Every entry is owned by root unless uid says otherwise.
type entry struct {
	name string // relative to /, a directory's ending in /
	mode int64
	uid  int
	data []byte
}

// baseEntries is what every platform's image holds besides the binary: the user databases, the CA bundle that TLS to
// Compute Engine, Google's token endpoints and Rancher needs, nonroot's home, and /tmp (the root filesystem is
// read-only in the Deployment; a writable /tmp is an emptyDir away).
func baseEntries(ca []byte) []entry {
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caBundlePath[1:], mode: 0o644, data: ca},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonroot},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
	}
}

// layer is a gzip-compressed tar layer of the entries, each dated t: the same entries and time give the same
// digest.
func layer(entries []entry, t time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.uid,
			ModTime:  t,
			Typeflag: tar.TypeReg,
			Size:     int64(len(e.data)),
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	content := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
