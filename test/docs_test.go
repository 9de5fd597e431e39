//go:build linux

package test

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	marshald "github.com/marshal-dev/marshal/internal/daemon"
)

// constants returns the string values of the constants of file whose
// names start with prefix.
func constants(t *testing.T, file, prefix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// TestTroubleshootingCoversEveryCode fails when a code or reason marshal
// can print is not explained in docs/troubleshooting.md.
func TestTroubleshootingCoversEveryCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	codes = append(codes, constants(t, "../internal/localapi/localapi.go", "Code")...)
	codes = append(codes, constants(t, "../controllers/conditions.go", "Reason")...)
	if len(codes) < 20 {
		t.Fatalf("found only %d codes: the sources moved?", len(codes))
	}
	for _, c := range codes {
		if !strings.Contains(string(doc), "`"+c+"`") {
			t.Errorf("docs/troubleshooting.md does not explain `%s`", c)
		}
	}
}

// TestTroubleshootingQuotesTheLoader fails when the table of manifest
// errors does not quote, word for word, each message the loader gives a
// field only marshald writes.
func TestTroubleshootingQuotesTheLoader(t *testing.T) {
	doc, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	msgs := constants(t, "../api/loader/decode.go", "msg")
	if len(msgs) < 2 {
		t.Fatalf("found %d messages: the sources moved?", len(msgs))
	}
	for _, m := range msgs {
		if !strings.Contains(string(doc), "| `"+m+"` |") {
			t.Errorf("docs/troubleshooting.md does not quote the loader's %q", m)
		}
	}
}

// TestDocLinksResolve fails on a relative link in the docs or the README
// to a file that does not exist.
func TestDocLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md", "../dist/systemd/README.md")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := filepath.Join(filepath.Dir(f), m[1])
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, m[1])
			}
		}
	}
}

// TestOperatingNamesEveryFlag holds docs/operating.md to marshald's flags:
// a flag nobody can read about is a flag nobody uses right.
func TestOperatingNamesEveryFlag(t *testing.T) {
	var help bytes.Buffer
	if err := marshald.Main(context.Background(), []string{"--help"}, &help); err != nil {
		t.Fatalf("marshald --help: %v", err)
	}
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z-]+)`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 10 {
		t.Fatalf("found %d flags in marshald --help:\n%s", len(flags), help.String())
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flags {
		switch f[1] {
		case "help", "version":
			continue
		}
		if !strings.Contains(string(doc), "`--"+f[1]) {
			t.Errorf("docs/operating.md does not name marshald's --%s", f[1])
		}
	}
}
