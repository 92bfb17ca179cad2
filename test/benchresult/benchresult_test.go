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

package benchresult

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type recorder struct {
	logs  []string
	fatal string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Logf(f string, args ...any)   { r.logs = append(r.logs, fmt.Sprintf(f, args...)) }
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }

func sampleRow() Row {
	return Row{
		ID:        "neg-churn",
		Benchmark: "BenchmarkChurn",
		Package:   "test/integration/neg",
		What:      "endpoint churn",
		Baseline:  "a plain loop",
		Measures:  []Measure{{Ours: 104, Baseline: Float(155), Unit: "changes/s", Goal: Float(0.9), GoalAtLeast: true}},
		Command:   "make bench-churn",
	}
}

func TestRecordWritesTheRowWhenAsked(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	var rec recorder
	Record(&rec, sampleRow())
	if rec.fatal != "" {
		t.Fatal(rec.fatal)
	}
	rows, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != "neg-churn" || rows[0].Date == "" || rows[0].Machine == "" {
		t.Fatalf("loaded %+v, want the recorded row with its date and machine", rows)
	}
}

func TestRecordWithoutTheDirectoryOnlyLogs(t *testing.T) {
	t.Setenv(EnvDir, "")
	var rec recorder
	Record(&rec, sampleRow())
	if rec.fatal != "" || len(rec.logs) != 1 || !strings.Contains(rec.logs[0], `"neg-churn"`) {
		t.Fatalf("fatal %q, logs %q: want the row logged", rec.fatal, rec.logs)
	}
}

func TestRecordRefusesAnUnusableRow(t *testing.T) {
	for name, mutate := range map[string]func(*Row){
		"bad id":            func(r *Row) { r.ID = "Neg Churn" },
		"no measures":       func(r *Row) { r.Measures = nil },
		"goal, no baseline": func(r *Row) { r.Measures[0].Baseline = nil },
		"zero baseline":     func(r *Row) { r.Measures[0].Baseline = Float(0) },
		"no command":        func(r *Row) { r.Command = "" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvDir, t.TempDir())
			r := sampleRow()
			mutate(&r)
			var rec recorder
			Record(&rec, r)
			if rec.fatal == "" {
				t.Fatal("recorded an unusable row")
			}
		})
	}
}

func TestRatioAndGoal(t *testing.T) {
	m := sampleRow().Measures[0]
	ratio, ok := m.Ratio()
	if !ok || ratio < 0.670 || ratio > 0.672 {
		t.Fatalf("ratio %v, %v; want 104/155", ratio, ok)
	}
	if met, ok := m.Met(); !ok || met {
		t.Fatalf("met %v, %v; want a goal of at least 0.9 not met by 0.67", met, ok)
	}
	m.GoalAtLeast = false
	if met, _ := m.Met(); !met {
		t.Fatal("0.67 is at most 0.9")
	}
}

func TestLoadRefusesAFileNamedForAnotherRow(t *testing.T) {
	dir := t.TempDir()
	data, err := Marshal(sampleRow())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("loaded a row from a file named for another")
	}
}

func TestFiguresKeepTheLastRunAndNameWhatIsMissing(t *testing.T) {
	var f Figures
	f.Set("a", 1)
	f.Set("a", 2)
	f.Set("b", 3)
	if got, missing := f.Get("a", "b"); missing != "" || len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("Get(a, b) = %v, %q; want [2 3]", got, missing)
	}
	if got, missing := f.Get("a", "c"); missing != "c" || got != nil {
		t.Errorf("Get(a, c) = %v, %q; want nil, c", got, missing)
	}
}

func TestGoTestSettingsAddTheBenchmarksOwn(t *testing.T) {
	got := GoTestSettings(map[string]string{"QPS": "500"})
	if got["QPS"] != "500" || got["GOMAXPROCS"] == "" || got["benchtime"] == "" {
		t.Errorf("GoTestSettings = %v; want QPS, GOMAXPROCS and benchtime", got)
	}
}

func TestRecordAppendsTheRunNote(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	t.Setenv(EnvRunNote, "One run on a busy machine.")
	row := sampleRow()
	row.Notes = "Bound by the API server."
	var rec recorder
	Record(&rec, row)
	rows, err := Load(dir)
	if err != nil || rec.fatal != "" {
		t.Fatalf("Load: %v; Record: %s", err, rec.fatal)
	}
	if want := "Bound by the API server. One run on a busy machine."; rows[0].Notes != want {
		t.Errorf("notes %q, want %q", rows[0].Notes, want)
	}
}

func TestThousandsSeparatesGroupsOfThree(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -2500: "-2,500"} {
		if got := Thousands(v); got != want {
			t.Errorf("Thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
