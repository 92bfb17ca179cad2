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
	"flag"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Figures gathers the figures of a benchmark's sub-benchmarks by name, so that the parent benchmark records one row
// once all of them ran. The testing package runs a sub-benchmark's function once per b.N it tries; each run
// replaces its figures, so what stays is the last run's, the one the benchmark reports.
type Figures struct {
	mu     sync.Mutex
	values map[string]float64
}

// Set records one figure, replacing the previous run's.
func (f *Figures) Set(name string, v float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.values == nil {
		f.values = map[string]float64{}
	}
	f.values[name] = v
}

// Get returns the named figures in order; missing names the first one no sub-benchmark set (one that -bench left
// out), and is empty when all were.
func (f *Figures) Get(names ...string) (values []float64, missing string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	values = make([]float64, len(names))
	for i, name := range names {
		v, ok := f.values[name]
		if !ok {
			return nil, name
		}
		values[i] = v
	}
	return values, ""
}

// GoTestSettings are the go test settings that shape a benchmark's figures (GOMAXPROCS, -benchtime; -race cannot
// be seen from here, so the row's Command says it), merged with the benchmark's own.
func GoTestSettings(own map[string]string) map[string]string {
	settings := map[string]string{"GOMAXPROCS": strconv.Itoa(runtime.GOMAXPROCS(0))}
	if f := flag.Lookup("test.benchtime"); f != nil {
		settings["benchtime"] = f.Value.String()
	}
	for k, v := range own {
		settings[k] = v
	}
	return settings
}

// Thousands prints a whole number with comma separators, as the table prints counts (10000 → "10,000").
func Thousands(v float64) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', 0, 64)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
