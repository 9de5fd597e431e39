package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var errNotDir = syscall.ENOTDIR

func profileYAML(name string) string {
	return fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: %s\n", name)
}

func workspaceYAML(name string) string {
	return fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: %s\nspec:\n  root: /srv/%s\n  profile: coder\n", name, name)
}

func hostYAML(name string) string {
	return fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata:\n  name: %s\n", name)
}

// writeFile writes content to path, creating its parent directories.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// symlink creates link pointing to target, creating link's directory.
func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// dirCase builds a tree under base (conf is the config dir, outside a
// sibling of it) and returns the path to hand to LoadDir.
type dirCase struct {
	name  string
	build func(t *testing.T, conf, outside string) string
}

var dirCases = []dirCase{
	{
		name: "conflicts",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "a.yaml"), profileYAML("coder"))
			writeFile(t, filepath.Join(conf, "b.yaml"), workspaceYAML("web")+"---\n"+workspaceYAML("web"))
			writeFile(t, filepath.Join(conf, "b", "x.yaml"), profileYAML("coder")+"---\n"+workspaceYAML("web")+"---\n"+profileYAML("other"))
			return conf
		},
	},
	{
		name: "host_singleton",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "20-host.yaml"), hostYAML("other"))
			writeFile(t, filepath.Join(conf, "10-host.yaml"), hostYAML("local"))
			writeFile(t, filepath.Join(conf, "30-more.yaml"), hostYAML("local")+"---\n"+hostYAML("third")+"---\n"+profileYAML("coder"))
			return conf
		},
	},
	{
		name: "symlink_out",
		build: func(t *testing.T, conf, outside string) string {
			writeFile(t, filepath.Join(outside, "x.yaml"), profileYAML("outside"))
			writeFile(t, filepath.Join(outside, "dir", "y.yaml"), profileYAML("outside-dir"))
			writeFile(t, filepath.Join(conf, "good.yaml"), profileYAML("good"))
			symlink(t, filepath.Join(outside, "x.yaml"), filepath.Join(conf, "x.yaml"))
			symlink(t, "../outside/dir", filepath.Join(conf, "shared"))
			// A link whose name does not count is not followed at all.
			symlink(t, filepath.Join(outside, "x.yaml"), filepath.Join(conf, "notes.txt"))
			return conf
		},
	},
	{
		name: "symlink_loop",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "good.yaml"), profileYAML("good"))
			symlink(t, "b.yaml", filepath.Join(conf, "a.yaml"))
			symlink(t, "a.yaml", filepath.Join(conf, "b.yaml"))
			symlink(t, "..", filepath.Join(conf, "sub", "up"))
			symlink(t, ".", filepath.Join(conf, "self"))
			symlink(t, "knot", filepath.Join(conf, "knot"))
			writeFile(t, filepath.Join(conf, "sub", "inner.yaml"), profileYAML("inner"))
			return conf
		},
	},
	{
		name: "configmap",
		build: func(t *testing.T, conf, _ string) string {
			// The layout the kubelet writes for a mounted ConfigMap.
			ts := filepath.Join(conf, "..2024_01_01_00_00_00.000000001")
			writeFile(t, filepath.Join(ts, "profile.yaml"), profileYAML("coder"))
			writeFile(t, filepath.Join(ts, "workspace.yaml"), workspaceYAML("web"))
			symlink(t, "..2024_01_01_00_00_00.000000001", filepath.Join(conf, "..data"))
			symlink(t, "..data/profile.yaml", filepath.Join(conf, "profile.yaml"))
			symlink(t, "..data/workspace.yaml", filepath.Join(conf, "workspace.yaml"))
			return conf
		},
	},
	{
		name: "config_dir_symlink",
		build: func(t *testing.T, conf, outside string) string {
			writeFile(t, filepath.Join(conf, "real.yaml"), profileYAML("real"))
			// Inside the resolved dir, not inside the link's directory.
			symlink(t, "real.yaml", filepath.Join(conf, "alias.yml"))
			link := filepath.Join(outside, "current")
			symlink(t, conf, link)
			return link
		},
	},
	{
		name: "ignored_files",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "good.yaml"), profileYAML("good"))
			for _, name := range []string{
				".hidden.yaml", ".git/config.yaml", "good.yaml~", ".good.yaml.swp", "good.yaml.swp",
				"good.yaml.swx", "4913", "#good.yaml#", "good.tmp", "good.yaml.tmp", "README.md",
				"good.yaml.bak", "notes.txt", "Makefile", ".#good.yaml", "dir.yaml/.x.yaml",
			} {
				writeFile(t, filepath.Join(conf, name), "this: [is not loaded\n")
			}
			return conf
		},
	},
	{
		name: "nested",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "z.json"), `{"apiVersion": "marshal.dev/v1alpha1", "kind": "Profile", "metadata": {"name": "json"}}`)
			writeFile(t, filepath.Join(conf, "a", "top.yml"), profileYAML("top"))
			writeFile(t, filepath.Join(conf, "a", "b", "c", "deep.yaml"), workspaceYAML("deep"))
			writeFile(t, filepath.Join(conf, "a.yaml"), hostYAML("local"))
			return conf
		},
	},
	{
		name: "bad_beside_good",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "1-good.yaml"), profileYAML("one"))
			writeFile(t, filepath.Join(conf, "2-bad.yaml"), profileYAML("two")+"spec:\n  limitz: {}\n---\n"+profileYAML("three"))
			writeFile(t, filepath.Join(conf, "3-syntax.yaml"), "kind: [Profile\n")
			writeFile(t, filepath.Join(conf, "4-good.yaml"), profileYAML("four"))
			return conf
		},
	},
	{
		name: "dangling",
		build: func(t *testing.T, conf, _ string) string {
			writeFile(t, filepath.Join(conf, "good.yaml"), profileYAML("good"))
			symlink(t, "missing.yaml", filepath.Join(conf, "gone.yaml"))
			symlink(t, "missing", filepath.Join(conf, "gone"))
			return conf
		},
	},
	{
		name: "empty",
		build: func(t *testing.T, conf, _ string) string {
			if err := os.MkdirAll(conf, 0o755); err != nil {
				t.Fatal(err)
			}
			return conf
		},
	},
}

// loadTree builds tc in a fresh temporary directory, loads it and renders
// the result with the temporary directory written as $TMP.
func loadTree(t *testing.T, tc dirCase) string {
	t.Helper()
	base := t.TempDir()
	conf, outside := filepath.Join(base, "conf"), filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := tc.build(t, conf, outside)
	r, err := LoadDir(t.Context(), dir)
	if err != nil {
		t.Fatalf("LoadDir(%q) = %v", dir, err)
	}
	got := renderResult(r)
	if resolved, err := filepath.EvalSymlinks(base); err == nil && resolved != base {
		got = strings.ReplaceAll(got, resolved, "$TMP")
	}
	return strings.ReplaceAll(got, base, "$TMP")
}

// TestLoadDirGolden loads each tree and compares the merged result with
// its golden file. Loading twice must give the same result.
func TestLoadDirGolden(t *testing.T) {
	for _, tc := range dirCases {
		t.Run(tc.name, func(t *testing.T) {
			got := loadTree(t, tc)
			if again := loadTree(t, tc); again != got {
				t.Errorf("second load differs:\n--- first\n%s\n--- second\n%s", got, again)
			}
			checkGolden(t, filepath.Join("testdata", "dir", tc.name+".golden"), got)
		})
	}
}

func TestLoadDirErrors(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file.yaml")
	writeFile(t, file, profileYAML("x"))
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		dir  string
		want error
	}{
		{name: "missing_dir", ctx: t.Context(), dir: filepath.Join(base, "missing"), want: os.ErrNotExist},
		{name: "not_a_dir", ctx: t.Context(), dir: file, want: errNotDir},
		{name: "canceled", ctx: canceled, dir: base, want: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := LoadDir(tc.ctx, tc.dir)
			if !errors.Is(err, tc.want) || r != nil {
				t.Errorf("LoadDir(%q) = %v, %v, want nil, %v", tc.dir, r, err, tc.want)
			}
		})
	}
}

// TestLoadDirFileErrorsAreClassified checks that a caller can tell a file
// that failed from a conflict between files.
func TestLoadDirFileErrorsAreClassified(t *testing.T) {
	conf := t.TempDir()
	writeFile(t, filepath.Join(conf, "a.yaml"), profileYAML("coder"))
	writeFile(t, filepath.Join(conf, "b.yaml"), profileYAML("coder"))
	writeFile(t, filepath.Join(conf, "c.yaml"), "kind: [\n")
	symlink(t, "/", filepath.Join(conf, "root"))
	r, err := LoadDir(t.Context(), conf)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]error{
		filepath.Join(conf, "a.yaml"): {ErrConflict},
		filepath.Join(conf, "b.yaml"): {ErrConflict},
		filepath.Join(conf, "c.yaml"): {ErrSyntax},
		filepath.Join(conf, "root"):   {ErrSymlink},
	}
	got := map[string][]error{}
	for _, e := range r.Errors {
		for _, class := range []error{ErrConflict, ErrSyntax, ErrSymlink} {
			if errors.Is(e, class) {
				got[e.File] = append(got[e.File], class)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("error classes = %v, want %v", got, want)
	}
	for _, f := range r.Files {
		if strings.HasSuffix(f.Path, "b.yaml") && (len(f.Errors) != 0 || len(f.Objects) != 1) {
			t.Errorf("file %s = %d objects, %d errors; a conflict must not fail the file", f.Path, len(f.Objects), len(f.Errors))
		}
	}
}

// TestLoadDirReportsPathsAsGiven checks that files are named by the
// directory as the caller wrote it joined with their path inside it, not
// by where a symlink leads.
func TestLoadDirReportsPathsAsGiven(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "real", "..v1", "p.yaml"), profileYAML("p"))
	symlink(t, "..v1/p.yaml", filepath.Join(base, "real", "p.yaml"))
	symlink(t, "real", filepath.Join(base, "conf"))
	t.Chdir(base)
	tests := []struct {
		name, dir, want string
	}{
		{name: "relative", dir: "conf", want: "conf/p.yaml"},
		{name: "trailing_slash", dir: "conf/", want: "conf/p.yaml"},
		{name: "dot_prefix", dir: "./conf", want: "conf/p.yaml"},
		{name: "absolute", dir: filepath.Join(base, "conf"), want: filepath.Join(base, "conf", "p.yaml")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := LoadDir(t.Context(), tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Objects) != 1 || r.Objects[0].File != tc.want || len(r.Files) != 1 || r.Files[0].Path != tc.want {
				t.Errorf("LoadDir(%q) = objects %v, files %v; want one from %s", tc.dir, r.Objects, r.Files, tc.want)
			}
		})
	}
}
