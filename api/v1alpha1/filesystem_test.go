package v1alpha1

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
)

func TestParseRulePath(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     RulePath
	}{
		{"root", "/", RulePath{Base: BaseRoot}},
		{"absolute", "/run/user/1000/docker.sock", RulePath{Base: BaseRoot, Rel: "run/user/1000/docker.sock"}},
		{"home", "~", RulePath{Base: BaseHome}},
		{"in_home", "~/.config/gh", RulePath{Base: BaseHome, Rel: ".config/gh"}},
		{"workspace", "{workspace}", RulePath{Base: BaseWorkspace}},
		{"in_workspace", "{workspace}/.git/hooks", RulePath{Base: BaseWorkspace, Rel: ".git/hooks"}},
		{"tmp", "{tmp}", RulePath{Base: BaseTmp}},
		{"dotted_names", "~/..foo/.bar/x..", RulePath{Base: BaseHome, Rel: "..foo/.bar/x.."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRulePath(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParseRulePath(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
			}
			if got.String() != tc.in {
				t.Errorf("ParseRulePath(%q).String() = %q", tc.in, got.String())
			}
		})
	}
}

func TestRulePathExpand(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/etc/passwd", "/etc/passwd"},
		{"~", "/home/dev"},
		{"~/.ssh", "/home/dev/.ssh"},
		{"{workspace}/.git/config", "/src/app/.git/config"},
		{"{tmp}", "/tmp/marshal-1"},
	} {
		p, err := ParseRulePath(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Expand("/home/dev", "/src/app", "/tmp/marshal-1"); got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The parser's refusals, one per line of testdata/rule_path_errors.golden
// (go test -run TestParseRulePathErrors -update rewrites it).
func TestParseRulePathErrors(t *testing.T) {
	inputs := []string{
		"", "relative/path", "./x", "*", "~/.ssh/*", "/home/?", "/[ab]", "~dev/.ssh", "~/", "~//x",
		"{workspace}/", "{workspace}x", "{home}/x", "{workspace", "/a/{tmp}", "/a/", "/a//b", "/a/./b",
		"/a/../b", "~/..", "/a\x00b", "/" + strings.Repeat("a", MaxRulePathLength),
	}
	var b strings.Builder
	for _, in := range inputs {
		_, err := ParseRulePath(in)
		if err == nil || !errors.Is(err, ErrRulePath) {
			t.Errorf("ParseRulePath(%q) = %v, want an ErrRulePath", in, err)
			continue
		}
		shown := in
		if len(shown) > 40 {
			shown = shown[:20] + fmt.Sprintf("…(%d bytes)", len(in))
		}
		fmt.Fprintf(&b, "%q: %v\n", shown, err)
	}
	golden(t, "testdata/rule_path_errors.golden", b.String())
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update to accept):\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}

// FuzzParseRulePath checks that what parses is what is written: it
// prints back as the input, expands to a clean absolute path, and names
// no glob and no "." or ".." element.
func FuzzParseRulePath(f *testing.F) {
	for _, s := range []string{"/", "~", "~/.ssh", "{workspace}/.git/hooks", "{tmp}", "/a/../b", "~x", "{x}", "/a//b", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseRulePath(s)
		if err != nil {
			if !errors.Is(err, ErrRulePath) || err.Error() == "" {
				t.Fatalf("ParseRulePath(%q) = %v, not an ErrRulePath", s, err)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("ParseRulePath(%q).String() = %q", s, p.String())
		}
		x := p.Expand("/home/dev", "/src/app", "/tmp/m")
		if path.Clean(x) != x || !path.IsAbs(x) {
			t.Fatalf("Expand(%q) = %q, not clean and absolute", s, x)
		}
		if strings.ContainsAny(s, "*?[\x00") {
			t.Fatalf("ParseRulePath(%q) took a glob or NUL", s)
		}
	})
}

func TestEffectiveFilesystemRules(t *testing.T) {
	fs := &FilesystemSpec{Rules: []FilesystemRule{
		{Access: FileWrite, Paths: []string{"~/.ssh/known_hosts", "/opt/cache"}},
		{Access: FileRead, Paths: []string{"~/.aws"}},
		{Access: FileNone, Paths: []string{"/opt/cache"}},
	}}
	got := map[string]string{}
	var order []string
	for _, r := range fs.Effective() {
		got[r.Path.String()] = string(r.Access) + " " + r.Origin
		order = append(order, r.Path.String())
	}
	for path, want := range map[string]string{
		"{workspace}":            "write default",
		"~/.ssh":                 "none default",
		"~/.aws":                 "read spec.filesystem.rules[1]",
		"~/.ssh/known_hosts":     "write spec.filesystem.rules[0]",
		"/opt/cache":             "none spec.filesystem.rules[2]",
		"{workspace}/.git/hooks": "read default",
	} {
		if got[path] != want {
			t.Errorf("Effective()[%s] = %q, want %q", path, got[path], want)
		}
	}
	if order[0] != "{workspace}" || order[len(order)-1] != "/opt/cache" {
		t.Errorf("Effective() order = %q: defaults first, then declared paths as they appear", order)
	}
}
