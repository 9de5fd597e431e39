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

// Every request of the proxy takes one path, whichever its protocol:
// each front-end (SOCKS5, an HTTP connection's first request, a request
// the HTTP server read) parses its protocol and hands the request to
// handle, which alone decides, dials and audits it; its record is
// written where it begins (newRecord), in handle, and where it ends
// (finish), nowhere else.
func TestEgressRequestsTakeOnePath(t *testing.T) {
	funcs := egressFuncs(t)
	for _, front := range []string{"serveSOCKS", "serveFirst", "serveHTTP"} {
		fn, ok := funcs[front]
		if !ok {
			t.Errorf("internal/egress has no front-end %s", front)
			continue
		}
		if !calls(fn, "handle") {
			t.Errorf("front-end %s does not hand its request to handle", front)
		}
	}
	writers := map[string]bool{"newRecord": true, "handle": true, "finish": true}
	for name, fn := range funcs {
		for _, step := range []string{"decide", "dial", "newRecord", "finish"} {
			if name != "handle" && calls(fn, step) {
				t.Errorf("%s calls %s, which only handle may", name, step)
			}
		}
		if !writers[name] {
			for _, field := range recordWrites(fn) {
				t.Errorf("%s writes the record's %s, which only newRecord, handle and finish may", name, field)
			}
		}
	}
}

// Who is at the other end of a socket is read in package peer alone: no
// other package asks the kernel for a socket's peer credentials, a pidfd
// of its peer or a TCP socket's group. devguardtest stands for a client
// of marshald's, which reads the authority as any program would.
func TestPeerIdentificationInOnePackage(t *testing.T) {
	asks := []string{"unix.GetsockoptUcred", "unix.SO_PEERCRED", "unix.SO_PEERPIDFD", "unix.NETLINK_SOCK_DIAG"}
	for _, root := range []string{"../internal", "../cmd"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
			if strings.HasPrefix(rel, "internal/peer/") || strings.HasPrefix(rel, "internal/devguardwire/devguardtest/") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, ask := range asks {
				if bytes.Contains(data, []byte(ask)) {
					t.Errorf("%s uses %s: a socket's peer is package peer's to read", rel, ask)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// egressFuncs returns the functions and methods of internal/egress's
// non-test files by name.
func egressFuncs(t *testing.T) map[string]*ast.FuncDecl {
	t.Helper()
	funcs := map[string]*ast.FuncDecl{}
	fset := token.NewFileSet()
	for _, f := range sources(t, "internal/egress") {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	return funcs
}

// calls reports whether fn calls a function or method named name.
func calls(fn *ast.FuncDecl, name string) bool {
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		switch f := call.Fun.(type) {
		case *ast.Ident:
			found = found || f.Name == name
		case *ast.SelectorExpr:
			found = found || f.Sel.Name == name
		}
		return !found
	})
	return found
}

// recordWrites returns the fields fn assigns through a variable that
// holds a *Record: a parameter of that type, or one made by &Record{} or
// newRecord.
func recordWrites(fn *ast.FuncDecl) []string {
	recs := map[string]bool{}
	for _, field := range fn.Type.Params.List {
		if star, ok := field.Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "Record" {
				for _, n := range field.Names {
					recs[n.Name] = true
				}
			}
		}
	}
	var writes []string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for i, rhs := range as.Rhs {
			if i < len(as.Lhs) && makesRecord(rhs) {
				if id, ok := as.Lhs[i].(*ast.Ident); ok {
					recs[id.Name] = true
				}
			}
		}
		for _, lhs := range as.Lhs {
			if sel, ok := lhs.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && recs[id.Name] {
					writes = append(writes, sel.Sel.Name)
				}
			}
		}
		return true
	})
	return writes
}

// makesRecord reports whether e is &Record{…} or a call of newRecord.
func makesRecord(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.UnaryExpr:
		lit, ok := e.X.(*ast.CompositeLit)
		if !ok {
			return false
		}
		id, ok := lit.Type.(*ast.Ident)
		return ok && id.Name == "Record"
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "newRecord"
	}
	return false
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

// resourceFile is the one file that tells a resource's field: every other
// per-resource value goes through cgroup.PerResource.
const resourceFile = "internal/cgroup/resource.go"

// No switch picks a resource's field or file outside cgroup.PerResource:
// limits, budgets, levels, plans, limit files and unit properties are
// all kept per resource by the one type, so that a resource is added, or
// a field renamed, in one place.
func TestPerResourceSwitchInOneRoom(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || rel == resourceFile {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, pos := range resourceSwitches(file) {
			t.Errorf("%s: a switch over cpu, memory and pids: keep the resource's value in a cgroup.PerResource (%s)", fset.Position(pos), resourceFile)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The check finds the switches it forbids, in each form they took.
func TestPerResourceSwitchRoomCheckFindsOne(t *testing.T) {
	for name, src := range map[string]string{
		"tagged": `package p
func get(r cgroup.Resource) int64 {
	switch r {
	case cgroup.CPU:
		return 1
	case cgroup.Memory:
		return 2
	}
	return 3
}`,
		"conditions, in package cgroup": `package cgroup
func read(r Resource, m Method) {
	switch {
	case r == CPU && m == MethodCgroupV1:
	case r == PIDs:
	}
}`,
		"names": `package p
func property(r string) string {
	switch r {
	case "cpu":
		return "CPUQuota"
	case "memory":
		return "MemoryMax"
	case "pids":
		return "TasksMax"
	}
	return ""
}`,
	} {
		file, err := parser.ParseFile(token.NewFileSet(), name+".go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := resourceSwitches(file); len(got) != 1 {
			t.Errorf("%s: found %d per-resource switches, want 1", name, len(got))
		}
	}
}

// resourceSwitches returns where file switches over resources: a switch
// whose cases name two or more of cgroup's resource constants, or all
// three resources' names as strings. A case naming one resource alone,
// such as CPU's scheduling priority, is no per-resource switch.
func resourceSwitches(file *ast.File) []token.Pos {
	inCgroup := file.Name.Name == "cgroup"
	var found []token.Pos
	ast.Inspect(file, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok {
			return true
		}
		consts, names := map[string]bool{}, map[string]bool{}
		for _, c := range sw.Body.List {
			for _, e := range c.(*ast.CaseClause).List {
				ast.Inspect(e, func(n ast.Node) bool {
					switch x := n.(type) {
					case *ast.SelectorExpr:
						if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "cgroup" && isResource(x.Sel.Name) {
							consts[x.Sel.Name] = true
						}
						return false
					case *ast.Ident:
						if inCgroup && isResource(x.Name) {
							consts[x.Name] = true
						}
					case *ast.BasicLit:
						if s := strings.Trim(x.Value, "\"`"); s == "cpu" || s == "memory" || s == "pids" {
							names[s] = true
						}
					}
					return true
				})
			}
		}
		if len(consts) >= 2 || len(names) == 3 {
			found = append(found, sw.Pos())
		}
		return true
	})
	return found
}

func isResource(name string) bool { return name == "CPU" || name == "Memory" || name == "PIDs" }
