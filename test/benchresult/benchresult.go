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

// Package benchresult owns the one source of the project's benchmark figures: each benchmark describes the row it
// measured as a Row and hands it to Record, which writes it, with the settings it ran under, to
// bench/results/<ID>.json when the run asks for it (BENCH_RESULTS_DIR, set by hack/bench.sh). The README's table
// is generated from those files, so a figure is written once, by the run that measured it.
//
// Ratios are not written by the benchmarks: the table computes each one from the two figures it divides, so a
// printed ratio always matches the figures beside it.
package benchresult

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// EnvDir names the directory Record writes to; unset, Record only logs the row.
const EnvDir = "BENCH_RESULTS_DIR"

// EnvRunNote, when set, is a sentence about the run as a whole ("one run on a busy machine") that Record appends to
// every row's Notes: what bounds the figures is known to whoever starts the run, not to the benchmark.
const EnvRunNote = "BENCH_RUN_NOTE"

// Measure is one figure of a row and, when it has one, the baseline measured beside it in the same run.
type Measure struct {
	// Label tells measures of one row apart ("10 Services", "1,000 tenants"); empty when the row has one.
	Label string `json:"label,omitempty"`
	// Ours is the figure of the product, in Unit.
	Ours float64 `json:"ours"`
	// Baseline is the same figure for the baseline, in Unit; nil when the row has no baseline for this measure.
	Baseline *float64 `json:"baseline,omitempty"`
	// Unit is printed after both figures ("ms", "µs", "B", "changes/s", "CPU s"); empty for a count.
	Unit string `json:"unit,omitempty"`
	// Goal, when set, is the ratio ours/baseline must stay at or under ("≤ 0.9" is Goal 0.9); GoalAtLeast flips it.
	Goal        *float64 `json:"goal,omitempty"`
	GoalAtLeast bool     `json:"goalAtLeast,omitempty"`
}

// Row is one line of the benchmark table.
type Row struct {
	// ID is stable and names the file (bench/results/<ID>.json) and the row's anchor; lower-case words and dashes.
	ID string `json:"id"`
	// Benchmark is the Go benchmark (or test) that measured the row, and Package its package directory.
	Benchmark string `json:"benchmark"`
	Package   string `json:"package"`
	// What the row measures, and what the baseline is, in a sentence each.
	What     string    `json:"what"`
	Baseline string    `json:"baseline,omitempty"`
	Measures []Measure `json:"measures"`
	// Notes are what a reader needs to trust the figures (what bounds them, what was seen meanwhile).
	Notes string `json:"notes,omitempty"`
	// Command reproduces the row; Settings are the knobs it ran with (environment, flags, QPS).
	Command  string            `json:"command"`
	Settings map[string]string `json:"settings,omitempty"`
	// Doc links the section that explains the row ("docs/neg.md#churn-at-scale-benchmarkchurn").
	Doc string `json:"doc,omitempty"`

	// Filled by Record.
	Date    string `json:"date"`
	Machine string `json:"machine"`
}

// Float is a helper for Measure.Baseline and Measure.Goal.
func Float(v float64) *float64 { return &v }

var idPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Validate reports what makes a row unusable for the table.
func (r Row) Validate() error {
	var problems []string
	if !idPattern.MatchString(r.ID) {
		problems = append(problems, fmt.Sprintf("id %q is not lower-case words joined by dashes", r.ID))
	}
	if r.Benchmark == "" || r.Package == "" || r.What == "" || r.Command == "" {
		problems = append(problems, "benchmark, package, what and command are required")
	}
	if len(r.Measures) == 0 {
		problems = append(problems, "no measures")
	}
	for i, m := range r.Measures {
		if m.Goal != nil && m.Baseline == nil {
			problems = append(problems, fmt.Sprintf("measure %d has a goal but no baseline to divide by", i))
		}
		if m.Baseline != nil && *m.Baseline == 0 {
			problems = append(problems, fmt.Sprintf("measure %d has a zero baseline", i))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("benchmark row %q: %s", r.ID, strings.Join(problems, "; "))
	}
	return nil
}

// Ratio is ours/baseline, and false when the measure has no baseline.
func (m Measure) Ratio() (float64, bool) {
	if m.Baseline == nil || *m.Baseline == 0 {
		return 0, false
	}
	return m.Ours / *m.Baseline, true
}

// Met reports whether the measure meets its goal; ok is false when it has none.
func (m Measure) Met() (met, ok bool) {
	ratio, has := m.Ratio()
	if m.Goal == nil || !has {
		return false, false
	}
	if m.GoalAtLeast {
		return ratio >= *m.Goal, true
	}
	return ratio <= *m.Goal, true
}

// TB is the part of testing.TB that Record uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Record logs the row and, when BENCH_RESULTS_DIR is set, writes it to <dir>/<ID>.json, replacing the previous
// run's. The date and the machine (CPUs, OS, architecture, Go version) are filled in here.
func Record(tb TB, r Row) {
	tb.Helper()
	r.Date = time.Now().UTC().Format("2006-01-02")
	r.Machine = fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if note := strings.TrimSpace(os.Getenv(EnvRunNote)); note != "" {
		r.Notes = strings.TrimSpace(r.Notes + " " + note)
	}
	if err := r.Validate(); err != nil {
		tb.Fatalf("%v", err)
	}
	data, err := Marshal(r)
	if err != nil {
		tb.Fatalf("benchmark row %q: %v", r.ID, err)
	}
	tb.Logf("benchmark row %s:\n%s", r.ID, data)
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("benchmark row %q: %v", r.ID, err)
	}
	if err := os.WriteFile(filepath.Join(dir, r.ID+".json"), data, 0o644); err != nil {
		tb.Fatalf("benchmark row %q: %v", r.ID, err)
	}
}

// Marshal encodes a row the way the results files hold it: indented, keys in a fixed order, a final newline.
func Marshal(r Row) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Load reads every row of a results directory, sorted by ID.
func Load(dir string) ([]Row, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(paths))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var r Row
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		if want := r.ID + ".json"; filepath.Base(path) != want {
			return nil, fmt.Errorf("%s: holds row %q, which belongs in %s", filepath.Base(path), r.ID, want)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	return rows, nil
}
