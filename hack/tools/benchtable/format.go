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
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// The table's number rules, one place for all rows so that two rows never print the same kind of figure two ways:
//   - a figure of 1,000 or more is a whole number with thousands separators (48,100);
//   - a smaller figure keeps 3 significant digits, trailing zeros dropped (61.2, 0.95, 5.6, 0.013);
//   - a ratio of 1 or more keeps 3 significant digits, trailing zeros kept so that every ratio of one magnitude has
//     the same width (1.00, 12.2, 340); a ratio under 1 keeps 2 (0.57, 0.046, 0.0062), enough to compare rows.

// formatFigure prints a measured figure.
func formatFigure(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	// 999.6 rounds to a whole thousand at 3 digits, so it takes the separator too.
	if math.Abs(v) >= 999.5 {
		return benchresult.Thousands(math.Round(v))
	}
	if v == 0 {
		return "0"
	}
	return trimZeros(strconv.FormatFloat(v, 'f', decimalsFor(v, 3), 64))
}

// formatRatio prints a ratio computed from two figures.
func formatRatio(r float64) string {
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return strconv.FormatFloat(r, 'g', -1, 64)
	}
	if r == 0 {
		return "0"
	}
	if math.Abs(r) >= 999.5 {
		return benchresult.Thousands(math.Round(r))
	}
	digits := 3
	if math.Abs(r) < 1 {
		digits = 2
	}
	return strconv.FormatFloat(r, 'f', decimalsFor(r, digits), 64)
}

// decimalsFor is how many decimals leave v with the given significant digits. Rounding can carry into the next
// magnitude (0.999 at 2 digits is 1.0), which then has one digit more than asked: harmless, and still the same value.
func decimalsFor(v float64, digits int) int {
	magnitude := int(math.Floor(math.Log10(math.Abs(v))))
	return max(0, digits-1-magnitude)
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// withUnit appends the unit, if any, to a printed figure.
func withUnit(figure, unit string) string {
	if unit == "" {
		return figure
	}
	return figure + " " + unit
}

// labeled prefixes a measure's label when the row has more than one measure.
func labeled(m benchresult.Measure, s string) string {
	if m.Label == "" {
		return s
	}
	return m.Label + ": " + s
}

// ratioText prints a measure's ratio and, when it has a goal, whether the goal is met; "—" without a baseline.
func ratioText(m benchresult.Measure) string {
	ratio, ok := m.Ratio()
	if !ok {
		return "—"
	}
	s := formatRatio(ratio)
	met, hasGoal := m.Met()
	if !hasGoal {
		return s
	}
	op := "≤"
	if m.GoalAtLeast {
		op = "≥"
	}
	verdict := "met"
	if !met {
		verdict = "not met"
	}
	return fmt.Sprintf("%s (goal %s %s: %s)", s, op, formatFigure(*m.Goal), verdict)
}
