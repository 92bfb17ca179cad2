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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

func TestFormatFigure(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 111: "111", 61.24: "61.2", 0.95: "0.95", 5.6: "5.6", 0.0133: "0.0133", 2.0: "2",
		999.6: "1,000", 1000: "1,000", 48100: "48,100", 1234567.8: "1,234,568", -2500: "-2,500",
	} {
		if got := formatFigure(v); got != want {
			t.Errorf("formatFigure(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFormatRatio(t *testing.T) {
	for v, want := range map[float64]string{
		1: "1.00", 1.0526: "1.05", 12.21: "12.2", 340 / 54.9: "6.19", 7.31: "7.31", 123.4: "123",
		0.5703: "0.57", 0.0462: "0.046", 0.00623: "0.0062", 0: "0", 2500: "2,500",
	} {
		if got := formatRatio(v); got != want {
			t.Errorf("formatRatio(%v) = %q, want %q", v, got, want)
		}
	}
}

func row(id string, measures ...benchresult.Measure) benchresult.Row {
	return benchresult.Row{
		ID: id, Benchmark: "BenchmarkX", Package: "pkg/x", What: "what " + id, Baseline: "a plain loop",
		Measures: measures, Command: "go test -bench X ./pkg/x/", Date: "2026-11-27", Machine: "2 CPUs",
		Settings: map[string]string{"QPS": "500", "BURST": "1000"}, Notes: "noted", Doc: "docs/x.md#bench",
	}
}

// The ratio printed is the one the figures give, whatever was written elsewhere: 340 / 54.9 is 6.19, not 5.5.
func TestTableComputesRatiosFromTheFigures(t *testing.T) {
	table := renderTable([]benchresult.Row{row("a-row",
		benchresult.Measure{Label: "1,000 Nodes", Ours: 340, Baseline: benchresult.Float(54.9), Unit: "µs"},
		benchresult.Measure{Label: "no baseline", Ours: 3, Unit: "s"})})
	for _, want := range []string{
		"| what a-row (`pkg/x`, [2026-11-27](docs/benchmarks.md#a-row)) |",
		"1,000 Nodes: 340 µs<br>no baseline: 3 s",
		"a plain loop:<br>1,000 Nodes: 54.9 µs<br>no baseline: —",
		"1,000 Nodes: 6.19<br>no baseline: — |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestGoalMetAndNotMet(t *testing.T) {
	for _, tc := range []struct {
		m    benchresult.Measure
		want string
	}{
		{benchresult.Measure{Ours: 1.28, Baseline: benchresult.Float(1.81), Goal: benchresult.Float(0.45)}, "0.71 (goal ≤ 0.45: not met)"},
		{benchresult.Measure{Ours: 0.4, Baseline: benchresult.Float(1), Goal: benchresult.Float(0.45)}, "0.40 (goal ≤ 0.45: met)"},
		{benchresult.Measure{Ours: 600, Baseline: benchresult.Float(100), Goal: benchresult.Float(5), GoalAtLeast: true}, "6.00 (goal ≥ 5: met)"},
		{benchresult.Measure{Ours: 100, Baseline: benchresult.Float(100), Goal: benchresult.Float(5), GoalAtLeast: true}, "1.00 (goal ≥ 5: not met)"},
		{benchresult.Measure{Ours: 2, Baseline: benchresult.Float(2)}, "1.00"},
		{benchresult.Measure{Ours: 2}, "—"},
	} {
		if got := ratioText(tc.m); got != tc.want {
			t.Errorf("ratioText(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

// A row without any baseline shows one dash in the baseline and ratio cells, not one per measure.
func TestTableRowWithoutBaselines(t *testing.T) {
	r := row("no-baselines", benchresult.Measure{Label: "a", Ours: 1}, benchresult.Measure{Label: "b", Ours: 2})
	r.Baseline = ""
	if table := renderTable([]benchresult.Row{r}); !strings.Contains(table, "| a: 1<br>b: 2 | — | — |") {
		t.Errorf("row without baselines:\n%s", table)
	}
}

func TestTableEscapesCells(t *testing.T) {
	r := row("pipes", benchresult.Measure{Ours: 1})
	r.What = "a | b\nc"
	if table := renderTable([]benchresult.Row{r}); !strings.Contains(table, `| a \| b c (`) {
		t.Errorf("cell not escaped:\n%s", table)
	}
}

func TestDetailsHaveOneSectionPerRowAnchoredByID(t *testing.T) {
	details := renderDetails([]benchresult.Row{row("first-row", benchresult.Measure{Ours: 2, Baseline: benchresult.Float(4)}), row("second-row", benchresult.Measure{Ours: 1})})
	for _, want := range []string{
		"\n## first-row\n\nWhat first-row. Baseline: a plain loop.\n", "\n## second-row\n", "| — | 2 | 4 | 0.50 |", "- Measured: 2026-11-27, on 2 CPUs\n",
		"- Command: `go test -bench X ./pkg/x/`\n", "- Settings: `BURST=1000`, `QPS=500`\n", "- Explained in: [docs/x.md#bench](x.md#bench)\n",
		"\nnoted\n",
	} {
		if !strings.Contains(details, want) {
			t.Errorf("details lack %q:\n%s", want, details)
		}
	}
}

func TestREADMEOnlyTheRegionChanges(t *testing.T) {
	readme := "# title\n\nbefore\n" + beginMarker + "\nold table\n" + endMarker + "\nafter\n"
	got, err := renderREADME(readme, []benchresult.Row{row("r", benchresult.Measure{Ours: 1})})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "# title\n\nbefore\n"+beginMarker+"\n| what |") || !strings.HasSuffix(got, "|\n"+endMarker+"\nafter\n") || strings.Contains(got, "old table") {
		t.Errorf("README rendered as:\n%s", got)
	}
	if _, err := renderREADME("no markers\n", nil); err == nil {
		t.Error("a README without the region was accepted")
	}
}

// The -verify path: an update makes both files match, then a figure edited by hand in the README, a stale details
// page, or a results file changed without rerendering, each fails the check.
func TestVerifyFindsAMismatch(t *testing.T) {
	dir := t.TempDir()
	results, readme, details := filepath.Join(dir, "results"), filepath.Join(dir, "README.md"), filepath.Join(dir, "benchmarks.md")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRow := func(r benchresult.Row) {
		t.Helper()
		data, err := benchresult.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(results, r.ID+".json"), string(data))
	}
	writeRow(row("a-row", benchresult.Measure{Ours: 0.57, Baseline: benchresult.Float(1)}))
	write(readme, "intro\n"+beginMarker+"\n"+endMarker+"\n")
	if err := run(results, readme, details, true); err == nil {
		t.Fatal("verify passed before the first update")
	}
	if err := run(results, readme, details, false); err != nil {
		t.Fatal(err)
	}
	if err := run(results, readme, details, true); err != nil {
		t.Fatalf("verify failed right after an update: %v", err)
	}

	good, _ := os.ReadFile(readme)
	write(readme, strings.Replace(string(good), "0.57", "0.43", 1))
	if err := run(results, readme, details, true); err == nil || !strings.Contains(err.Error(), "README.md does not match") {
		t.Errorf("a figure edited by hand in the README: verify returned %v", err)
	}
	write(readme, string(good))

	writeRow(row("a-row", benchresult.Measure{Ours: 0.6, Baseline: benchresult.Float(1)}))
	err := run(results, readme, details, true)
	if err == nil || !strings.Contains(err.Error(), "README.md does not match") || !strings.Contains(err.Error(), "benchmarks.md does not match") {
		t.Errorf("a results file changed without rerendering: verify returned %v", err)
	}
}
