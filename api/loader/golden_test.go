package loader

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the .golden files from the current output (inputs are never written)")

// inputs lists the manifests in testdata, sorted.
func inputs(t testing.TB) []string {
	t.Helper()
	var paths []string
	for _, pattern := range []string{"*.yaml", "*.yml", "*.json"} {
		m, err := filepath.Glob(filepath.Join("testdata", pattern))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	slices.Sort(paths)
	if len(paths) == 0 {
		t.Fatal("no inputs in testdata")
	}
	return paths
}

// goldenPath is the golden file of input: its name with the extension
// replaced.
func goldenPath(input string) string {
	return strings.TrimSuffix(input, filepath.Ext(input)) + ".golden"
}

// checkGolden compares got with the golden file at path, or rewrites it
// under -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if filepath.Ext(path) != ".golden" {
		t.Fatalf("refusing to use %s as a golden file", path)
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// renderErrors writes errs one per line.
func renderErrors(b *bytes.Buffer, errs []*Error) {
	if len(errs) == 0 {
		return
	}
	b.WriteString("errors:\n")
	for _, e := range errs {
		fmt.Fprintf(b, "  %s\n", e)
	}
}

// renderFile writes the outcome of one file: its errors, then each object
// as YAML.
func renderFile(t testing.TB, f File) string {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "file %s: %d objects, %d errors\n", f.Path, len(f.Objects), len(f.Errors))
	renderErrors(&b, f.Errors)
	for _, o := range f.Objects {
		fmt.Fprintf(&b, "object %s %q at %s:%d\n", o.GetTypeMeta().Kind, o.GetObjectMeta().Name, o.File, o.Line)
		y, err := sigsyaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(y)) {
			b.WriteString("  " + line)
		}
	}
	return b.String()
}

// renderResult writes a merged result: objects, errors, then files.
func renderResult(r *Result) string {
	var b bytes.Buffer
	b.WriteString("objects:\n")
	for _, o := range r.Objects {
		fmt.Fprintf(&b, "  %s %q at %s:%d\n", o.GetTypeMeta().Kind, o.GetObjectMeta().Name, o.File, o.Line)
	}
	renderErrors(&b, r.Errors)
	b.WriteString("files:\n")
	for _, f := range r.Files {
		fmt.Fprintf(&b, "  %s: %d objects, %d errors\n", f.Path, len(f.Objects), len(f.Errors))
	}
	return b.String()
}

// TestGolden loads every manifest in testdata on its own and compares the
// outcome, errors with file, line and field path, with its golden file.
func TestGolden(t *testing.T) {
	stems := map[string]string{}
	defer func() {
		// Every golden file belongs to an input.
		goldens, _ := filepath.Glob(filepath.Join("testdata", "*.golden"))
		for _, g := range goldens {
			if _, ok := stems[g]; !ok {
				t.Errorf("%s has no input; remove it", g)
			}
		}
	}()
	for _, in := range inputs(t) {
		golden := goldenPath(in)
		if other, ok := stems[golden]; ok {
			t.Fatalf("%s and %s would share %s", in, other, golden)
		}
		stems[golden] = in
		t.Run(filepath.Base(in), func(t *testing.T) {
			checkGolden(t, golden, renderFile(t, LoadFile(in)))
		})
	}
}

// TestGoldenGenerated covers inputs too large or too repetitive to keep
// in testdata; they are written to a temporary directory first.
func TestGoldenGenerated(t *testing.T) {
	tests := []struct {
		name string
		data func() []byte
	}{
		{
			name: "too_large",
			data: func() []byte {
				// A valid manifest padded with comments to one byte over.
				head := "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: big}\n"
				pad := strings.Repeat("# padding padding padding padding padding padding padding padding\n", MaxFileSize/64)
				return []byte((head + pad)[:MaxFileSize] + "\n")
			},
		},
		{
			name: "alias_limit",
			data: func() []byte {
				// 1,001 aliases in one list: one node past the bound.
				var b strings.Builder
				b.WriteString("apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: many}\nspec:\n")
				b.WriteString("  root: /srv/many\n  profile: &p coder\n  exec:\n    argv0:\n")
				for range maxAliasNodes + 1 {
					b.WriteString("      - *p\n")
				}
				return []byte(b.String())
			},
		},
		{
			name: "alias_within_limit",
			data: func() []byte {
				var b strings.Builder
				b.WriteString("apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: many}\nspec:\n")
				b.WriteString("  root: /srv/many\n  profile: &p coder\n  exec:\n    argv0: [")
				for i := range maxAliasNodes {
					if i > 0 {
						b.WriteString(", ")
					}
					b.WriteString("*p")
				}
				b.WriteString("]\n")
				return []byte(b.String())
			},
		},
		{
			name: "too_many_invalid_values",
			data: func() []byte {
				// Each invalid key costs a line lookup: the file must still
				// load quickly.
				var b strings.Builder
				b.WriteString("apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: env}\nspec:\n")
				b.WriteString("  root: /srv/env\n  profile: coder\n  exec:\n    env:\n")
				for i := range 50_000 {
					fmt.Fprintf(&b, "      =%05d: x\n", i)
				}
				return []byte(b.String())
			},
		},
		{
			name: "too_many_errors",
			data: func() []byte {
				var b strings.Builder
				b.WriteString("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: noisy}\nspec:\n")
				for i := range maxErrorsPerFile + 20 {
					fmt.Fprintf(&b, "  unknown%d: x\n", i)
				}
				return []byte(b.String())
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.name+".yaml")
			data := tc.data()
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			fromFile := LoadFile(path)
			fromBytes := LoadBytes(path, data)
			got := renderFile(t, fromFile)
			if other := renderFile(t, fromBytes); other != got {
				t.Errorf("LoadBytes and LoadFile disagree:\n--- LoadBytes\n%s\n--- LoadFile\n%s", other, got)
			}
			got = strings.ReplaceAll(got, dir, "$DIR")
			// Long lists of identical errors are summed up in the golden.
			checkGolden(t, filepath.Join("testdata", "generated", tc.name+".golden"), summarize(got))
		})
	}
}

// summarize keeps the first three and the last two lines of every run of
// more than five lines that differ only in digits.
func summarize(s string) string {
	lines := strings.SplitAfter(s, "\n")
	shape := func(l string) string {
		return strings.Map(func(r rune) rune {
			if '0' <= r && r <= '9' {
				return '#'
			}
			return r
		}, l)
	}
	var out []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && shape(lines[j]) == shape(lines[i]) {
			j++
		}
		if j-i > 5 {
			out = append(out, lines[i:i+3]...)
			out = append(out, fmt.Sprintf("  ... %d more like these ...\n", j-i-5))
			out = append(out, lines[j-2:j]...)
		} else {
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return strings.Join(out, "")
}

// TestGoldenInput loads the manifests in testdata/input as marshalctl
// apply reads what it is given (LoadInput), and checks that the config
// dir's loading (LoadBytes) still refuses what LoadInput ignores.
func TestGoldenInput(t *testing.T) {
	var ins []string
	for _, pattern := range []string{"*.yaml", "*.json"} {
		m, _ := filepath.Glob(filepath.Join("testdata", "input", pattern))
		ins = append(ins, m...)
	}
	if len(ins) == 0 {
		t.Fatal("no inputs in testdata/input")
	}
	for _, in := range ins {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, goldenPath(in), renderFile(t, LoadInput(in, data)))
			if strict := LoadBytes(in, data); len(strict.Errors) == 0 {
				t.Errorf("LoadBytes(%s) loaded %d objects, want errors: a config dir's file may not declare status or be a List", in, len(strict.Objects))
			}
		})
	}
}
