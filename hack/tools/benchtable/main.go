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

// Command benchtable renders the project's benchmark figures from the one place they are written,
// bench/results/*.json (see test/benchresult): the README's table, between its "BEGIN GENERATED: benchmark table"
// and "END GENERATED" markers, and docs/benchmarks.md, one section per row. With -verify it writes nothing and
// fails when either file differs from what it would write, so that a figure edited by hand, or a results file
// committed without its table, is caught by make verify.
//
//	go run ./hack/tools/benchtable [-verify] [-results bench/results] [-readme README.md] [-details docs/benchmarks.md]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

func main() {
	results := flag.String("results", "bench/results", "the directory of the results files")
	readme := flag.String("readme", "README.md", "the README whose generated region holds the table")
	details := flag.String("details", detailsPage, "the page with one section per row")
	verify := flag.Bool("verify", false, "write nothing; fail if a file differs from what would be written")
	flag.Parse()
	if err := run(*results, *readme, *details, *verify); err != nil {
		fmt.Fprintf(os.Stderr, "benchtable: %v\n", err)
		os.Exit(1)
	}
}

// run renders both files from the results directory and writes them, or, with verify, compares them.
func run(resultsDir, readmePath, detailsPath string, verify bool) error {
	rows, err := benchresult.Load(resultsDir)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("no results in %s", resultsDir)
	}
	current, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	readme, err := renderREADME(string(current), rows)
	if err != nil {
		return fmt.Errorf("%s: %w", readmePath, err)
	}
	want := map[string][]byte{readmePath: []byte(readme), detailsPath: []byte(renderDetails(rows))}
	var stale []error
	for _, path := range []string{readmePath, detailsPath} {
		if !verify {
			if err := os.WriteFile(path, want[path], 0o644); err != nil {
				return err
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if !bytes.Equal(got, want[path]) {
			stale = append(stale, fmt.Errorf("%s does not match %s/*.json (%s); run make update", path, resultsDir, firstDifference(got, want[path])))
		}
	}
	return errors.Join(stale...)
}

// firstDifference names the first line where got and want differ, so a failed check says where to look.
func firstDifference(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, truncate(gl), truncate(wl))
		}
	}
	return "same lines"
}

func truncate(line []byte) string {
	const n = 100
	if len(line) > n {
		return string(line[:n]) + "…"
	}
	return string(line)
}
