//go:build linux

package test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sources returns the non-test Go files of the package in dir.
func sources(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			out = append(out, f)
		}
	}
	return out
}

// The config source and the intake stay in rooms a reader can hold in
// mind: the watcher and the loader apart from the declarations, the feed
// and the generations, none over 400 lines.
func TestSourceFilesStaySmall(t *testing.T) {
	filesStaySmall(t, "internal/source", 400)
	filesStaySmall(t, "internal/intake", 400)
}

// The daemon wires the intake and holds none of its logic: a manifest
// edit goes from the config dir to the stores without passing through
// it, and no generation or last good object is kept by it.
func TestDaemonHoldsNoIntake(t *testing.T) {
	for _, f := range sources(t, "internal/daemon") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"state.Generations", "state.LastGood", "Desired.Next(", "Desired.Restore(", ") Declare(", "intake.Change"} {
			if bytes.Contains(data, []byte(ref)) {
				t.Errorf("%s refers to %s: generations and declarations are package intake's", f, ref)
			}
		}
	}
}

// A launch's steps stay readable one by one: no function of
// internal/launch is over 80 lines, its cleanup on the one rollback stack.
func TestLaunchFunctionsStaySmall(t *testing.T) {
	functionsStaySmall(t, "internal/launch", 80)
}

// The admission authority stays in rooms by concern (opening and
// recovery, host inputs, attempt transitions, the writer, the journal),
// none over 600 lines, and its steps readable one by one.
func TestAdmissionFilesAndFunctionsStaySmall(t *testing.T) {
	filesStaySmall(t, "internal/admission", 600)
	functionsStaySmall(t, "internal/admission", 80)
}

// The proxy's steps stay readable one by one: no function of
// internal/egress is over 80 lines.
func TestEgressFunctionsStaySmall(t *testing.T) {
	functionsStaySmall(t, "internal/egress", 80)
}

// filesStaySmall fails for every non-test file of the package in dir
// over most lines.
func filesStaySmall(t *testing.T, dir string, most int) {
	t.Helper()
	for _, f := range sources(t, dir) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(data, []byte("\n")); n > most {
			t.Errorf("%s has %d lines, more than %d: split it where its parts meet", f, n, most)
		}
	}
}

// functionsStaySmall fails for every function of the non-test files of
// the package in dir over most lines.
func functionsStaySmall(t *testing.T, dir string, most int) {
	t.Helper()
	fset := token.NewFileSet()
	for _, f := range sources(t, dir) {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > most {
				t.Errorf("%s: %s is %d lines, more than %d", fset.Position(fn.Pos()), fn.Name.Name, n, most)
			}
		}
	}
}
