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
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// packageChart does what `helm package --version VERSION-without-v --app-version VERSION CHARTDIR` does (Helm's
// loader follows the chart's links into manifests/, and chartutil.Save writes the archive), then dates every entry
// of the archive with created instead of the time of the run. The chart's image tag defaults to its appVersion, so
// the packaged chart installs this release's image.
func packageChart(chartDir, version string, created time.Time, outDir string) (string, error) {
	// Helm's loader logs each symbolic link it follows through the standard logger.
	log.SetOutput(io.Discard)
	c, err := loader.LoadDir(chartDir)
	log.SetOutput(os.Stderr)
	if err != nil {
		return "", fmt.Errorf("loading the chart %s: %w", chartDir, err)
	}
	c.Metadata.Version = strings.TrimPrefix(version, "v")
	c.Metadata.AppVersion = version

	tmp, err := os.MkdirTemp("", "release-chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	saved, err := chartutil.Save(c, tmp)
	if err != nil {
		return "", fmt.Errorf("packaging the chart: %w", err)
	}
	out := filepath.Join(outDir, filepath.Base(saved))
	if err := redate(saved, out, created); err != nil {
		return "", fmt.Errorf("dating the chart archive's entries: %w", err)
	}
	return out, nil
}

// redate copies the gzip-compressed tar archive src to dst with every entry's modification time set to t and its
// access and change times dropped, keeping the gzip header Helm writes (its Extra and Comment).
func redate(src, dst string, t time.Time) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	zw := gzip.NewWriter(out)
	zw.Header.Extra, zw.Header.Comment = zr.Header.Extra, zr.Header.Comment
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime, h.Format = t, time.Time{}, time.Time{}, tar.FormatUnknown
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
