//go:build linux

package test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every package has exactly one package comment, in its doc.go (a
// command's may be in its main.go), saying
// what the package is for: a second one would be concatenated into the
// package's documentation, and a missing one leaves a reader guessing.
func TestEveryPackageHasOneDocComment(t *testing.T) {
	docs := map[string][]string{} // dir → files with a package comment
	dirs := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		dirs[dir] = true
		if f.Doc != nil {
			docs[dir] = append(docs[dir], name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 30 {
		t.Fatalf("found %d packages; is the walk rooted at the module?", len(dirs))
	}
	for dir := range dirs {
		switch files := docs[dir]; {
		case len(files) == 0:
			t.Errorf("%s: no package comment (write one in doc.go)", dir)
		case len(files) > 1:
			t.Errorf("%s: package comments in %s, want one, in doc.go", dir, strings.Join(files, ", "))
		case files[0] != "doc.go" && files[0] != "main.go": // a command's main.go is its doc
			t.Errorf("%s: package comment in %s, want it in doc.go", dir, files[0])
		}
	}
}
