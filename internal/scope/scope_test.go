package scope_test

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/scope"
)

const testID = "0123456789abcdef0123456789abcdef"

func TestNewIDIsLowercaseHexAndDistinct(t *testing.T) {
	const n = 10000
	seen := make(map[string]bool, n)
	for range n {
		id := scope.NewID()
		if len(id) != scope.IDLength {
			t.Fatalf("NewID() = %q: %d digits, want %d", id, len(id), scope.IDLength)
		}
		for _, c := range id {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("NewID() = %q: %q is not a lowercase hex digit", id, c)
			}
		}
		if !scope.ValidID(id) {
			t.Fatalf("ValidID(NewID() = %q) = false", id)
		}
		if seen[id] {
			t.Fatalf("NewID() returned %q twice in %d calls", id, n)
		}
		seen[id] = true
	}
}

func TestScopeNameOfLongestProfileIsAValidUnitName(t *testing.T) {
	// The profile that escapes longest: 32 letters between 31 dashes.
	profile := strings.TrimSuffix(strings.Repeat("a-", 32), "-")
	if len(profile) != 63 || v1alpha1.ValidateName(profile) != nil {
		t.Fatalf("test profile %q is not a valid 63-character name", profile)
	}
	// systemd refuses unit names longer than 255 bytes (UNIT_NAME_MAX).
	if name := scope.ScopeName(profile, testID); len(name) > 255 {
		t.Errorf("ScopeName(%q) is %d bytes, over systemd's 255", profile, len(name))
	}
}

func TestParseScopeNameAccepts(t *testing.T) {
	tests := []struct {
		name    string
		unit    string
		profile string
	}{
		{name: "plain", unit: "marshal-coder-" + testID + ".scope", profile: "coder"},
		{name: "one_char", unit: "marshal-a-" + testID + ".scope", profile: "a"},
		{name: "digit", unit: "marshal-0-" + testID + ".scope", profile: "0"},
		{name: "escaped_dash", unit: `marshal-my\x2dagent-` + testID + ".scope", profile: "my-agent"},
		{name: "escaped_dashes_in_a_row", unit: `marshal-a\x2d\x2db-` + testID + ".scope", profile: "a--b"},
		{name: "profile_of_hex_digits", unit: "marshal-abc123-" + testID + ".scope", profile: "abc123"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := scope.ParseScopeName(tc.unit)
			want := scope.Identity{Profile: tc.profile, ID: testID, Scope: tc.unit}
			if !ok || got != want {
				t.Errorf("ParseScopeName(%q) = %+v, %v, want %+v, true", tc.unit, got, ok, want)
			}
		})
	}
}

func TestParseScopeNameRejects(t *testing.T) {
	tests := []struct {
		name string
		unit string
	}{
		{name: "empty", unit: ""},
		{name: "prefix_only", unit: "marshal-"},
		{name: "no_prefix", unit: "coder-" + testID + ".scope"},
		{name: "other_prefix", unit: "marshall-coder-" + testID + ".scope"},
		{name: "slice_suffix", unit: "marshal-coder-" + testID + ".slice"},
		{name: "service_suffix", unit: "marshal-coder-" + testID + ".service"},
		{name: "no_suffix", unit: "marshal-coder-" + testID},
		{name: "suffix_twice", unit: "marshal-coder-" + testID + ".scope.scope"},
		{name: "trailing_space", unit: "marshal-coder-" + testID + ".scope "},
		{name: "deleted_marker", unit: "marshal-coder-" + testID + ".scope (deleted)"},
		{name: "uppercase_id", unit: "marshal-coder-" + strings.ToUpper(testID) + ".scope"},
		{name: "non_hex_id", unit: "marshal-coder-" + testID[:31] + "g.scope"},
		{name: "id_31_digits", unit: "marshal-coder-" + testID[:31] + ".scope"},
		{name: "id_33_digits", unit: "marshal-coder-" + testID + "0.scope"},
		{name: "no_dash_before_id", unit: "marshal-coder" + testID + ".scope"},
		{name: "no_id", unit: "marshal-coder.scope"},
		{name: "empty_profile", unit: "marshal--" + testID + ".scope"},
		{name: "unescaped_dash", unit: "marshal-my-agent-" + testID + ".scope"},
		{name: "uppercase_escape", unit: `marshal-my\x2Dagent-` + testID + ".scope"},
		{name: "escaped_dot", unit: `marshal-my\x2eagent-` + testID + ".scope"},
		{name: "escaped_letter", unit: `marshal-\x61gent-` + testID + ".scope"},
		{name: "truncated_escape", unit: `marshal-my\x2-` + testID + ".scope"},
		{name: "backslash", unit: `marshal-my\agent-` + testID + ".scope"},
		{name: "leading_escaped_dash", unit: `marshal-\x2dcoder-` + testID + ".scope"},
		{name: "trailing_escaped_dash", unit: `marshal-coder\x2d-` + testID + ".scope"},
		{name: "uppercase_profile", unit: "marshal-Coder-" + testID + ".scope"},
		{name: "dot_in_profile", unit: "marshal-my.agent-" + testID + ".scope"},
		{name: "underscore_in_profile", unit: "marshal-my_agent-" + testID + ".scope"},
		{name: "profile_64_chars", unit: "marshal-" + strings.Repeat("a", 64) + "-" + testID + ".scope"},
		{name: "slash_in_name", unit: "marshal-coder/x-" + testID + ".scope"},
		{name: "profile_slice", unit: "marshal-coder.slice"},
		{name: "root_slice", unit: "marshal.slice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := scope.ParseScopeName(tc.unit); ok {
				t.Errorf("ParseScopeName(%q) = %+v, true, want false", tc.unit, got)
			}
		})
	}
}

func TestParse(t *testing.T) {
	unit := scope.ScopeName("coder", testID)
	inner := scope.ScopeName("inner", strings.Repeat("f", 32))
	tests := []struct {
		name     string
		path     string
		wantPath string // empty: Parse must refuse
	}{
		{name: "systemd_layout", path: "/marshal.slice/marshal-coder.slice/" + unit, wantPath: "/marshal.slice/marshal-coder.slice/" + unit},
		{name: "under_a_parent", path: "/a/b/marshal.slice/marshal-coder.slice/" + unit, wantPath: "/a/b/marshal.slice/marshal-coder.slice/" + unit},
		{name: "sub_cgroups_below", path: "/marshal.slice/marshal-coder.slice/" + unit + "/sub/deeper", wantPath: "/marshal.slice/marshal-coder.slice/" + unit},
		{name: "at_root", path: "/" + unit, wantPath: "/" + unit},
		{name: "bare_name", path: unit, wantPath: unit},
		{name: "relative_to_namespace", path: "/../../" + unit + "/x", wantPath: "/../../" + unit},
		{name: "trailing_slash", path: "/x/" + unit + "/", wantPath: "/x/" + unit},
		{name: "innermost_wins", path: "/" + unit + "/x/" + inner + "/y", wantPath: "/" + unit + "/x/" + inner},
		{name: "root", path: "/"},
		{name: "empty", path: ""},
		{name: "profile_slice", path: "/marshal.slice/marshal-coder.slice"},
		{name: "session_scope", path: "/user.slice/user-1000.slice/session-2.scope"},
		{name: "deleted_marker", path: "/marshal.slice/marshal-coder.slice/" + unit + " (deleted)"},
		{name: "scope_name_inside_component", path: "/x" + unit + "/y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := scope.Parse(tc.path)
			if tc.wantPath == "" {
				if ok {
					t.Errorf("Parse(%q) = %+v, true, want false", tc.path, got)
				}
				return
			}
			if !ok || got.Path != tc.wantPath {
				t.Fatalf("Parse(%q) = %+v, %v, want Path %q", tc.path, got, ok, tc.wantPath)
			}
			if want, _ := scope.ParseScopeName(got.Path[strings.LastIndexByte(got.Path, '/')+1:]); got.Profile != want.Profile || got.ID != want.ID || got.Scope != want.Scope {
				t.Errorf("Parse(%q) = %+v, want the identity of %q", tc.path, got, want.Scope)
			}
		})
	}
}

// profileGen draws valid profile names (DNS-1123 labels), leaning on
// dashes and digits, which are where escaping and parsing can go wrong.
func profileGen() *rapid.Generator[string] {
	alphabets := []string{"a-", "09-", "abcdefghijklmnopqrstuvwxyz0123456789-"}
	return rapid.Custom(func(t *rapid.T) string {
		alphabet := rapid.SampledFrom(alphabets).Draw(t, "alphabet")
		b := rapid.SliceOfN(rapid.SampledFrom([]byte(alphabet)), 1, 63).Draw(t, "bytes")
		if b[0] == '-' {
			b[0] = alphabet[0]
		}
		if b[len(b)-1] == '-' {
			b[len(b)-1] = alphabet[0]
		}
		return string(b)
	})
}

func idGen() *rapid.Generator[string] {
	return rapid.StringMatching(`[0-9a-f]{32}`)
}

func TestScopeNameRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		profile, id := profileGen().Draw(t, "profile"), idGen().Draw(t, "id")
		if errs := v1alpha1.ValidateName(profile); errs != nil {
			t.Fatalf("generator drew invalid profile %q: %v", profile, errs)
		}
		name := scope.ScopeName(profile, id)
		got, ok := scope.ParseScopeName(name)
		want := scope.Identity{Profile: profile, ID: id, Scope: name}
		if !ok || got != want {
			t.Fatalf("ParseScopeName(%q) = %+v, %v, want %+v, true", name, got, ok, want)
		}
		if _, ok := scope.ParseScopeName(scope.SliceName(profile)); ok {
			t.Fatalf("ParseScopeName(%q) accepted a slice name", scope.SliceName(profile))
		}
	})
}

func TestParseFindsNestedScope(t *testing.T) {
	component := rapid.StringMatching(`[a-zA-Z0-9_:@.-]{1,16}`)
	// Groups an agent makes below its scope: no dot, so never a scope name.
	sub := rapid.StringMatching(`[a-zA-Z0-9_:@-]{1,16}`)
	rapid.Check(t, func(t *rapid.T) {
		profile, id := profileGen().Draw(t, "profile"), idGen().Draw(t, "id")
		name := scope.ScopeName(profile, id)
		above := rapid.SliceOfN(component, 0, 4).Draw(t, "above")
		if rapid.Bool().Draw(t, "systemd_layout") {
			above = append(above, scope.RootSlice, scope.SliceName(profile))
		}
		below := rapid.SliceOfN(sub, 0, 4).Draw(t, "below")

		scopePath := "/" + strings.Join(append(above, name), "/")
		path := strings.Join(append([]string{scopePath}, below...), "/")
		got, ok := scope.Parse(path)
		want := scope.Identity{Profile: profile, ID: id, Scope: name, Path: scopePath}
		if !ok || got != want {
			t.Fatalf("Parse(%q) = %+v, %v, want %+v, true", path, got, ok, want)
		}
	})
}

func TestParseSliceName(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		ok      bool
	}{
		{name: "marshal-coder.slice", profile: "coder", ok: true},
		{name: `marshal-my\x2dagent.slice`, profile: "my-agent", ok: true},
		{name: "marshal-my-agent.slice", ok: false},
		{name: `marshal-my\x2Dagent.slice`, ok: false},
		{name: "marshal.slice", ok: false},
		{name: "marshal-Coder.slice", ok: false},
		{name: "marshal-coder.scope", ok: false},
		{name: "other-coder.slice", ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := scope.ParseSliceName(tc.name)
			if p != tc.profile || ok != tc.ok {
				t.Errorf("ParseSliceName(%q) = %q, %v, want %q, %v", tc.name, p, ok, tc.profile, tc.ok)
			}
			if ok && scope.SliceName(p) != tc.name {
				t.Errorf("SliceName(%q) = %q, want %q back", p, scope.SliceName(p), tc.name)
			}
		})
	}
}
