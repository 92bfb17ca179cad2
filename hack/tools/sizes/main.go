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

// Command sizes lists the hand-written Go files (tests and generated code aside) over a line limit and the
// functions over another, so that no file or function grows past what one can hold in one's head. A function whose
// doc comment says it "reads better whole" (and why) may be longer.
//
//	go run ./hack/tools/sizes [-max-file-lines N] [-max-func-lines N] [-top N] DIR...
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type measure struct {
	lines int
	where string
}

func main() {
	maxFile := flag.Int("max-file-lines", 500, "the most lines a hand-written file may have")
	maxFunc := flag.Int("max-func-lines", 80, "the most lines a function may have")
	top := flag.Int("top", 0, "also print the N largest files and longest functions")
	flag.Parse()
	var files, funcs []measure
	var over []string
	fset := token.NewFileSet()
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !handWritten(path) {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			n := fset.Position(f.End()).Line
			if src, err := os.ReadFile(path); err == nil {
				n = strings.Count(string(src), "\n")
			}
			files = append(files, measure{n, path})
			if n > *maxFile {
				over = append(over, fmt.Sprintf("%s: %d lines (at most %d)", path, n, *maxFile))
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				where := fmt.Sprintf("%s:%d %s", path, fset.Position(fd.Pos()).Line, funcName(fd))
				funcs = append(funcs, measure{lines, where})
				if lines > *maxFunc && !readsBetterWhole(fd) {
					over = append(over, fmt.Sprintf("%s: %d lines (at most %d, unless its doc comment says why it reads better whole)", where, lines, *maxFunc))
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if *top > 0 {
		for _, list := range [][]measure{files, funcs} {
			sort.Slice(list, func(i, j int) bool { return list[i].lines > list[j].lines })
			for _, m := range list[:min(*top, len(list))] {
				fmt.Printf("%5d  %s\n", m.lines, m.where)
			}
			fmt.Println()
		}
	}
	if len(over) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(over, "\n"))
		os.Exit(1)
	}
}

func handWritten(path string) bool {
	return strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") &&
		!strings.HasPrefix(filepath.Base(path), "zz_generated") && !strings.Contains(filepath.ToSlash(path), "/generated/")
}

func readsBetterWhole(fd *ast.FuncDecl) bool {
	return fd.Doc != nil && strings.Contains(strings.Join(strings.Fields(fd.Doc.Text()), " "), "reads better whole")
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch t := t.(type) {
	case *ast.Ident:
		return t.Name + "." + fd.Name.Name
	case *ast.IndexExpr:
		if id, ok := t.X.(*ast.Ident); ok {
			return id.Name + "." + fd.Name.Name
		}
	}
	return fd.Name.Name
}
