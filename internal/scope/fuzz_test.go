package scope_test

import (
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/scope"
)

func FuzzParse(f *testing.F) {
	id := testID
	for _, seed := range []string{
		"",
		"/",
		"//",
		"/a//b/",
		"marshal-.scope",
		"marshal--" + id + ".scope",
		"/marshal.slice/marshal-coder.slice/marshal-coder-" + id + ".scope",
		"/marshal.slice/marshal-coder.slice/marshal-coder-" + id + ".scope/sub/deeper",
		"/marshal.slice/marshal-coder.slice/marshal-coder-" + id + ".scope (deleted)",
		"marshal-coder-" + strings.ToUpper(id) + ".scope",
		"marshal-coder-" + id[:31] + ".scope",
		"marshal-coder-" + id + "0.scope",
		`marshal-my\x2dagent-` + id + ".scope",
		`marshal-my\x2Dagent-` + id + ".scope",
		`marshal-my\x2eagent-` + id + ".scope",
		`marshal-\x2dmy-` + id + ".scope",
		`marshal-my\x2-` + id + ".scope",
		"marshal-my-agent-" + id + ".scope",
		"marshal-My-" + id + ".scope",
		"marshal-my_agent-" + id + ".scope",
		"marshal-" + strings.Repeat("a", 64) + "-" + id + ".scope",
		"marshal-" + strings.Repeat("a", 63) + "-" + id + ".scope",
		"/a/marshal-x-" + id + ".scope/sub/marshal-y-" + strings.Repeat("f", 32) + ".scope/deeper",
		"/marshal-x-" + id + ".scope//",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, ok := scope.Parse(path)
		if !ok {
			return
		}
		if !strings.HasPrefix(path, got.Path) || len(path) > len(got.Path) && path[len(got.Path)] != '/' {
			t.Fatalf("Parse(%q).Path = %q, not a component prefix of the input", path, got.Path)
		}
		last := got.Path[strings.LastIndexByte(got.Path, '/')+1:]
		if last != got.Scope {
			t.Fatalf("Parse(%q).Scope = %q, want the last component of Path %q", path, got.Scope, got.Path)
		}
		if formatted := scope.ScopeName(got.Profile, got.ID); formatted != last {
			t.Fatalf("Parse(%q) = %+v, which formats to %q, not %q", path, got, formatted, last)
		}
		if errs := v1alpha1.ValidateName(got.Profile); errs != nil {
			t.Fatalf("Parse(%q) accepted invalid profile %q: %v", path, got.Profile, errs)
		}
		if !scope.ValidID(got.ID) {
			t.Fatalf("Parse(%q) accepted invalid ID %q", path, got.ID)
		}
		for _, c := range strings.Split(path[len(got.Path):], "/") {
			if _, ok := scope.ParseScopeName(c); ok {
				t.Fatalf("Parse(%q) = %q, but %q below it is a scope too: not the innermost", path, got.Path, c)
			}
		}
	})
}
