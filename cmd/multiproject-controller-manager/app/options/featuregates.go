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

package options

import (
	"strings"

	"github.com/spf13/pflag"
)

// gatesHiddenFromHelp are gates that importing k8s.io/apiserver registers in the process-wide gate but that change
// nothing in this binary. They stay registered, since the libraries look them up and a lookup of an unknown gate
// panics; --help just does not offer them. ShardedListAndWatch is kube-apiserver's: this binary reads shard
// selectors through --sharded-watch whatever its own gate says.
var gatesHiddenFromHelp = []string{"ShardedListAndWatch"}

// hideGatesFromHelp removes the lines of the hidden gates from --feature-gates' usage, which featuregate's AddFlag
// writes one gate per line ("Name=true|false (STAGE - default=...)").
func hideGatesFromHelp(fs *pflag.FlagSet) {
	f := fs.Lookup("feature-gates")
	if f == nil {
		return
	}
	lines := strings.Split(f.Usage, "\n")
	kept := lines[:0]
	for _, line := range lines {
		hidden := false
		for _, gate := range gatesHiddenFromHelp {
			if strings.HasPrefix(line, gate+"=") {
				hidden = true
				break
			}
		}
		if !hidden {
			kept = append(kept, line)
		}
	}
	f.Usage = strings.Join(kept, "\n")
}
