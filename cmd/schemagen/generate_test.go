package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// moduleRoot is the module root seen from this package's directory,
// where tests run.
const moduleRoot = "../.."

const fixCommand = "run `make generate` (or go run ./cmd/schemagen) and commit the result"

func TestGeneratedFilesAreCurrent(t *testing.T) {
	want, err := generate(t.Context(), moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, err := os.ReadFile(filepath.Join(moduleRoot, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			t.Errorf("%s is missing: %s", name, fixCommand)
		case err != nil:
			t.Error(err)
		case !bytes.Equal(got, want[name]):
			t.Errorf("%s is stale (first difference on line %d): %s", name, firstDifference(got, want[name]), fixCommand)
		}
	}
	stale, err := staleFiles(moduleRoot, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		t.Errorf("%s is no longer generated: delete it", name)
	}
}

// firstDifference is the line, counted from 1, where a and b first
// differ.
func firstDifference(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

func TestGenerateIsDeterministic(t *testing.T) {
	first, err := generate(t.Context(), moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := generate(t.Context(), moduleRoot)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range first {
			if !bytes.Equal(again[name], data) {
				t.Fatalf("%s differs between two runs", name)
			}
		}
	}
}

func TestGenerateStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := generate(ctx, moduleRoot); err == nil {
		t.Fatal("generate with a cancelled context succeeded")
	}
}

func testDocs(t *testing.T) map[string]string {
	t.Helper()
	docs, err := readDocs(filepath.Join(moduleRoot, "api", "v1alpha1"))
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestReadDocsFindsFieldComments(t *testing.T) {
	docs := testDocs(t)
	for _, key := range []string{"Profile", "ObjectMeta.Name", "ResourcesSpec.Participation", "TypeMeta.APIVersion"} {
		if docs[key] == "" {
			t.Errorf("readDocs: no comment for %s", key)
		}
	}
	if _, err := readDocs(t.TempDir()); err == nil {
		t.Error("readDocs of a directory without Go files succeeded")
	}
}

func TestUserDoc(t *testing.T) {
	tests := []struct {
		name, field, doc, want string
	}{
		{"drops_field_is", "MaxLive", "MaxLive is the number of slots.", "The number of slots."},
		{"drops_field_are", "Labels", "Labels are free pairs.", "Free pairs."},
		{"keeps_other_verbs", "Allow", "Allow permits executions.", "Allow permits executions."},
		{"keeps_bare_field_is", "Root", "Root is ", "Root is "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := userDoc(tc.field, tc.doc); got != tc.want {
				t.Errorf("userDoc(%q, %q) = %q, want %q", tc.field, tc.doc, got, tc.want)
			}
		})
	}
}

// withRules returns the rule table with extra entries added.
func withRules(extra map[string]rule) map[string]rule {
	r := maps.Clone(rules)
	maps.Copy(r, extra)
	return r
}

func TestRulesMustFitTheTypes(t *testing.T) {
	docs := testDocs(t)
	tests := []struct {
		name  string
		rules map[string]rule
		want  error
	}{
		{"unknown_field", withRules(map[string]rule{"Profile.spec.isolatoin": {required: true}}), errUnknownField},
		{"unknown_kind", withRules(map[string]rule{"Agent.status.profile": {required: true}}), errUnknownField},
		{"path_through_a_string", withRules(map[string]rule{"Profile.spec.isolation.mode": {required: true}}), errUnknownField},
		{"wildcard_missing_in_a_kind", withRules(map[string]rule{"*.spec.root": {required: true}}), errUnknownField},
		{"pattern_on_an_integer", withRules(map[string]rule{"Host.spec.capacity.tasks": {pattern: "x", minimum: &one}}), errRuleMismatch},
		{"minimum_on_a_string", withRules(map[string]rule{"Profile.spec.isolation": {minimum: &one}}), errRuleMismatch},
		{"values_of_a_string", withRules(map[string]rule{"Profile.spec.orphans": {values: &rule{pattern: "x"}}}), errRuleMismatch},
		{"items_of_a_map", withRules(map[string]rule{"Workspace.spec.exec.env": {items: &rule{pattern: "x"}}}), errRuleMismatch},
		{"two_rules_on_one_field", withRules(map[string]rule{"Host.metadata.name": withRequired(name)}), errRuleMismatch},
		{"optional_string_refusing_empty", withRules(map[string]rule{"Profile.spec.isolation": {pattern: "^c"}}), errRuleMismatch},
		{"constant_on_an_optional_field", withRules(map[string]rule{"Profile.spec.orphans": {constant: "keep"}}), errRuleMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &generator{rules: tc.rules, docs: docs}
			_, err := g.generate(t.Context())
			if !errors.Is(err, tc.want) {
				t.Fatalf("generate = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("bad_regexp", func(t *testing.T) {
		g := &generator{rules: withRules(map[string]rule{"Profile.spec.isolation": {pattern: "("}}), docs: docs}
		_, err := g.generate(t.Context())
		var se *syntax.Error
		if !errors.As(err, &se) {
			t.Fatalf("generate = %v, want a regexp syntax error", err)
		}
	})
}

// walkSchemas calls f with every schema inside s and its location.
func walkSchemas(s *object, at string, f func(s *object, at string)) {
	f(s, at)
	for _, k := range s.keys {
		switch v := s.get(k).(type) {
		case *object:
			switch k {
			case "properties", "$defs":
				for _, name := range v.keys {
					walkSchemas(v.sub(name), at+"/"+k+"/"+name, f)
				}
			default:
				walkSchemas(v, at+"/"+k, f)
			}
		case []any:
			if k == "anyOf" || k == "allOf" {
				for i, e := range v {
					if o, ok := e.(*object); ok {
						walkSchemas(o, at+"/"+k+"/"+strconv.Itoa(i), f)
					}
				}
			}
		}
	}
}

func hasType(s *object, typ string) bool {
	switch t := s.get("type").(type) {
	case string:
		return t == typ
	case []any:
		return slices.Contains(t, any(typ))
	}
	return false
}

// TestEveryValueIsConstrained keeps a new field from going without a
// rule: every string of the manifest schema is a constant, an enum or a
// pattern, every integer bounded.
func TestEveryValueIsConstrained(t *testing.T) {
	out, err := generate(t.Context(), moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseJSON(out[outDir+"/"+combinedFile])
	if err != nil {
		t.Fatal(err)
	}
	strs, ints := 0, 0
	walkSchemas(v.(*object), "#", func(s *object, at string) {
		switch {
		case hasType(s, "string"):
			strs++
			if !s.has("const") && !s.has("enum") && !s.has("pattern") {
				t.Errorf("%s: a string without const, enum or pattern: add a rule in rules.go", at)
			}
		case hasType(s, "integer"):
			ints++
			if !s.has("minimum") || !s.has("maximum") {
				t.Errorf("%s: an integer without minimum and maximum: add a rule in rules.go", at)
			}
		}
	})
	if strs == 0 || ints == 0 {
		t.Fatalf("walked %d strings and %d integers: the walk misses the schema", strs, ints)
	}
}

func TestManifestSchemaLeavesOutWhatMarshaldWrites(t *testing.T) {
	out, err := generate(t.Context(), moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range v1alpha1.Kinds {
		v, err := parseJSON(out[outDir+"/"+kindFile(kind)])
		if err != nil {
			t.Fatal(err)
		}
		doc := v.(*object)
		if doc.sub("properties").has("status") {
			t.Errorf("%s schema declares status", kind)
		}
		meta := doc.sub("$defs").sub("ObjectMeta").sub("properties")
		for _, f := range []string{"generation", "creationTimestamp"} {
			if meta.has(f) {
				t.Errorf("%s schema declares metadata.%s", kind, f)
			}
		}
		for _, name := range doc.sub("$defs").keys {
			if strings.HasSuffix(name, "Status") || name == "Condition" {
				t.Errorf("%s schema keeps the status type %s", kind, name)
			}
		}
	}
}

// matchesRule reports whether s satisfies the string keywords of r, as a
// JSON Schema validator reads them (lengths in characters).
func matchesRule(r rule, s string) bool {
	n := len([]rune(s))
	return (r.pattern == "" || regexp.MustCompile(r.pattern).MatchString(s)) &&
		(r.notPattern == "" || !regexp.MustCompile(r.notPattern).MatchString(s)) &&
		(r.maxLength == 0 || n <= r.maxLength) && n >= r.minLength
}

// TestPatternsAgreeWithTheLoaderChecks compares each pattern with the
// check the loader makes, on many more strings than whole documents
// reach.
func TestPatternsAgreeWithTheLoaderChecks(t *testing.T) {
	alphabet := rapid.RuneFrom([]rune("az09-_./A:é "))
	tests := []struct {
		name   string
		rule   rule
		loader func(string) bool
		gen    *rapid.Generator[string]
	}{
		{
			name:   "object_name",
			rule:   name,
			loader: func(s string) bool { return len(v1alpha1.ValidateName(s)) == 0 },
			gen: rapid.OneOf(rapid.StringOfN(alphabet, 0, 70, -1),
				rapid.StringMatching(`[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?`)),
		},
		{
			name:   "label_key",
			rule:   *rules["*.metadata.labels"].keys,
			loader: func(s string) bool { return validLabels(map[string]string{s: ""}) },
			gen: rapid.OneOf(rapid.StringOfN(alphabet, 0, 70, -1),
				rapid.StringMatching(`([a-z0-9]([-a-z0-9.]{0,8}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,70}[A-Za-z0-9])?`),
				rapid.Custom(func(t *rapid.T) string {
					return strings.Repeat("a", rapid.IntRange(248, 258).Draw(t, "prefix")) + "/" +
						strings.Repeat("b", rapid.IntRange(1, 64).Draw(t, "name"))
				})),
		},
		{
			name:   "label_value",
			rule:   *rules["*.metadata.labels"].values,
			loader: func(s string) bool { return validLabels(map[string]string{"k": s}) },
			gen: rapid.OneOf(rapid.StringOfN(alphabet, 0, 70, -1),
				rapid.StringMatching(`([A-Za-z0-9]([-A-Za-z0-9_.]{0,70}[A-Za-z0-9])?)?`)),
		},
		{
			name: "prepared_ttl",
			rule: rules["Host.spec.prepared_ttl"],
			loader: func(s string) bool {
				d, err := time.ParseDuration(s)
				return err == nil && d > 0
			},
			gen: durationString(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				s := tc.gen.Draw(t, "s")
				if got, want := matchesRule(tc.rule, s), tc.loader(s); got != want {
					t.Fatalf("schema accepts %q: %v, loader: %v", s, got, want)
				}
			})
		})
	}
}

// validLabels reports whether the loader accepts a profile with these
// labels.
func validLabels(labels map[string]string) bool {
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata = v1alpha1.ObjectMeta{Name: "p", Labels: labels}
	return len(p.Validate()) == 0
}

// durationString draws duration strings, valid and not, short of the two
// cases positiveDuration documents it cannot tell: overflow and positive
// fractions of a nanosecond.
func durationString() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "odd") == 0 {
			return rapid.SampledFrom([]string{"", "0", "+0", "-0", "5", "soon", "1h-5m", "s", ".s", "1.s", "1..5s", "1e3s", "5 s", " 5s"}).Draw(t, "odd_value")
		}
		var b strings.Builder
		b.WriteString(rapid.SampledFrom([]string{"", "", "", "+", "-"}).Draw(t, "sign"))
		for range rapid.IntRange(1, 3).Draw(t, "parts") {
			whole := rapid.SampledFrom([]string{"", "0", "00", "1", "5", "10", "007", "999"}).Draw(t, "whole")
			frac := rapid.SampledFrom([]string{"", "", ".", ".0", ".5", ".000", ".001", ".250"}).Draw(t, "frac")
			units := []string{"us", "µs", "μs", "ms", "s", "m", "h", "x", ""}
			if frac == "" {
				units = append(units, "ns")
			}
			unit := rapid.SampledFrom(units).Draw(t, "unit")
			b.WriteString(whole + frac + unit)
			if unit == "" {
				// A number without a unit ends the string: one more
				// part would read as its unit.
				break
			}
		}
		return b.String()
	})
}
