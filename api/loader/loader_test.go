package loader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func TestMatches(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{name: "x.yaml", want: true},
		{name: "x.yml", want: true},
		{name: "x.json", want: true},
		{name: "10-host.yaml", want: true},
		{name: "x.YAML", want: false},
		{name: ".x.yaml", want: false},
		{name: ".yaml", want: false},
		{name: "x.yaml~", want: false},
		{name: ".x.yaml.swp", want: false},
		{name: "x.yaml.swp", want: false},
		{name: "x.yaml.swx", want: false},
		{name: "x.yaml.tmp", want: false},
		{name: "x.tmp", want: false},
		{name: "4913", want: false},
		{name: "#x.yaml#", want: false},
		{name: ".#x.yaml", want: false},
		{name: "x.yaml.bak", want: false},
		{name: "x.yaml.backup", want: false},
		{name: "x", want: false},
		{name: "", want: false},
		{name: "x.txt", want: false},
	}
	for _, tc := range tests {
		if got := Matches(tc.name); got != tc.want {
			t.Errorf("Matches(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	fields := []string{"isolation", "limits", "orphans"}
	limits := []string{"cpu_milli", "memory_bytes", "tasks"}
	tests := []struct {
		name       string
		candidates []string
		in, want   string
	}{
		{name: "one_letter_off", candidates: fields, in: "limitz", want: "limits"},
		{name: "transposed", candidates: fields, in: "orpahns", want: "orphans"},
		{name: "camel_case", candidates: limits, in: "cpuMilli", want: "cpu_milli"},
		{name: "dashes", candidates: limits, in: "memory-bytes", want: "memory_bytes"},
		{name: "upper_case", candidates: fields, in: "LIMITS", want: "limits"},
		{name: "too_far", candidates: limits, in: "cpu", want: ""},
		{name: "unrelated", candidates: fields, in: "replicas", want: ""},
		{name: "short_word", candidates: []string{"cpu", "pids"}, in: "cpx", want: "cpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := suggest(tc.in, tc.candidates); got != tc.want {
				t.Errorf("suggest(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCheckText(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantLine int
		wantMsg  string
	}{
		{name: "ascii", in: "a: 1\nb: 2\n"},
		{name: "tabs_and_crlf", in: "a:\t1\r\nb: 2\r\n"},
		{name: "multibyte", in: "a: café 😀\nb: x\u00a0\ufeff\n"},
		{name: "invalid_byte", in: "a: 1\nb: \xff\n", wantLine: 2, wantMsg: "invalid UTF-8 (byte 0xff); manifests must be UTF-8 text"},
		{name: "truncated_sequence", in: "a: 1\n\nb: \xe2\x82\n", wantLine: 3, wantMsg: "invalid UTF-8 (byte 0xe2); manifests must be UTF-8 text"},
		{name: "surrogate_encoded", in: "a: \xed\xa0\x80\n", wantLine: 1, wantMsg: "invalid UTF-8 (byte 0xed); manifests must be UTF-8 text"},
		{name: "nul", in: "a: 1\x00\n", wantLine: 1, wantMsg: "control character U+0000 is not allowed"},
		{name: "escape", in: "\n\na: \x1b[0m\n", wantLine: 3, wantMsg: "control character U+001B is not allowed"},
		{name: "delete", in: "a: \x7f\n", wantLine: 1, wantMsg: "control character U+007F is not allowed"},
		{name: "c1_control", in: "a: \u0090\n", wantLine: 1, wantMsg: "control character U+0090 is not allowed"},
		{name: "noncharacter", in: "a: \uffff\n", wantLine: 1, wantMsg: "control character U+FFFF is not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			line, msg := checkText([]byte(tc.in))
			if line != tc.wantLine || msg != tc.wantMsg {
				t.Errorf("checkText(%q) = %d, %q, want %d, %q", tc.in, line, msg, tc.wantLine, tc.wantMsg)
			}
			// Whatever checkText lets through, the parser reads.
			if msg == "" {
				if f := LoadBytes("x.yaml", []byte(tc.in)); len(f.Errors) == 0 {
					return
				} else if errors.Is(f.Errors[0], ErrSyntax) {
					t.Errorf("parser refused text checkText accepted: %v", f.Errors[0])
				}
			}
		})
	}
}

func TestNormalizeJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "unchanged", in: `{"a": "b\\/c"}`, want: `{"a": "b\\/c"}`},
		{name: "slash", in: `{"a": "b\/c"}`, want: `{"a": "b/c"}`},
		{name: "escaped_backslash_then_slash", in: `{"a": "b\\\/c"}`, want: `{"a": "b\\/c"}`},
		{name: "surrogate_pair", in: `{"a": "\ud83d\ude00"}`, want: `{"a": "\U0001F600"}`},
		{name: "upper_case_pair", in: `{"a": "\uD83D\uDE00"}`, want: `{"a": "\U0001F600"}`},
		{name: "lone_high", in: `{"a": "\ud83dx"}`, want: `{"a": "\uFFFDx"}`},
		{name: "lone_low", in: `{"a": "\ude00"}`, want: `{"a": "\uFFFD"}`},
		{name: "high_then_high", in: `{"a": "\ud83d\ud83d\ude00"}`, want: `{"a": "\uFFFD\U0001F600"}`},
		{name: "bmp_escape_kept", in: `{"a": "\u00e9\/"}`, want: `{"a": "\u00e9/"}`},
		{name: "outside_string", in: `{"a\/b": 1} \/`, want: `{"a/b": 1} \/`},
		{name: "truncated", in: `{"a": "\ud83d`, want: `{"a": "\uFFFD`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(normalizeJSON([]byte(tc.in))); got != tc.want {
				t.Errorf("normalizeJSON(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestJSONDecodesAsEncodingJSON checks that string escapes in a .json
// manifest mean what encoding/json says they mean.
func TestJSONDecodesAsEncodingJSON(t *testing.T) {
	values := []string{`a\/b`, `\ud83d\ude00`, `\ud83d`, `\u00e9\t\"\\`, `\uDBFF\uDFFF`}
	for _, v := range values {
		doc := fmt.Sprintf(`{"apiVersion": "marshal.dev/v1alpha1", "kind": "Workspace", "metadata": {"name": "w"},
			"spec": {"root": "/r", "profile": "p", "exec": {"env": {"V": "%s"}}}}`, v)
		f := LoadBytes("w.json", []byte(doc))
		if len(f.Errors) > 0 {
			t.Errorf("%s: %v", v, f.Errors)
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(`"`+v+`"`), &want); err != nil {
			t.Fatal(err)
		}
		if got := f.Objects[0].Object.(*v1alpha1.Workspace).Spec.Exec.Env["V"]; got != want {
			t.Errorf("%s decoded to %q, want %q", v, got, want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  Error
		want string
	}{
		{name: "all_parts", err: Error{File: "ws.yaml", Line: 14, Kind: "Workspace", Name: "webapp", Field: "spec.x", Message: "bad"}, want: `ws.yaml:14: Workspace "webapp": spec.x: bad`},
		{name: "no_field", err: Error{File: "ws.yaml", Line: 1, Kind: "Host", Name: "local", Message: "bad"}, want: `ws.yaml:1: Host "local": bad`},
		{name: "no_name", err: Error{File: "ws.yaml", Line: 3, Kind: "Profile", Field: "metadata.name", Message: "required"}, want: `ws.yaml:3: Profile: metadata.name: required`},
		{name: "no_kind", err: Error{File: "ws.yaml", Line: 3, Name: "c", Field: "kind", Message: "required"}, want: `ws.yaml:3: "c": kind: required`},
		{name: "syntax", err: Error{File: "ws.yaml", Line: 2, Message: "syntax error: x"}, want: `ws.yaml:2: syntax error: x`},
		{name: "no_line", err: Error{File: "ws.yaml", Message: "too large"}, want: `ws.yaml: too large`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	b, err := json.Marshal(&Error{File: "a.yaml", Line: 2, Kind: "Host", Name: "h", Field: "spec", Message: "m", class: ErrInvalid})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"file":"a.yaml","line":2,"kind":"Host","name":"h","field":"spec","message":"m"}`; string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
}

// TestErrorClasses checks the structured fields and the class of one error
// of each kind LoadBytes reports.
func TestErrorClasses(t *testing.T) {
	const head = "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: p\n"
	tests := []struct {
		name  string
		in    string
		class error
		want  Error
	}{
		{name: "syntax", in: "a: [\n", class: ErrSyntax, want: Error{Line: 1}},
		{name: "encoding", in: "a: \xff\n", class: ErrEncoding, want: Error{Line: 1}},
		{name: "too_large", in: strings.Repeat("#", MaxFileSize+1), class: ErrTooLarge},
		{name: "sequence", in: "- a\n", class: ErrNotObject, want: Error{Line: 1}},
		{name: "unknown_kind", in: "apiVersion: marshal.dev/v1alpha1\nkind: Pod\n", class: ErrNotObject, want: Error{Line: 2, Kind: "Pod", Field: "kind"}},
		{name: "unknown_field", in: head + "spec: {x: 1}\n", class: ErrUnknownField, want: Error{Line: 5, Kind: "Profile", Name: "p", Field: "spec.x"}},
		{name: "duplicate", in: head + "spec: {}\nspec: {}\n", class: ErrDuplicateKey, want: Error{Line: 6, Kind: "Profile", Name: "p", Field: "spec"}},
		{name: "type", in: head + "spec: []\n", class: ErrType, want: Error{Line: 5, Kind: "Profile", Name: "p", Field: "spec"}},
		{name: "merge_key", in: head + "spec: {<<: {}}\n", class: ErrAlias, want: Error{Line: 5, Kind: "Profile", Name: "p", Field: "spec"}},
		{name: "read_only", in: head + "status: {}\n", class: ErrReadOnly, want: Error{Line: 5, Kind: "Profile", Name: "p", Field: "status"}},
		{name: "invalid", in: head + "spec: {orphans: never}\n", class: ErrInvalid, want: Error{Line: 5, Kind: "Profile", Name: "p", Field: "spec.orphans"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := LoadBytes("x.yaml", []byte(tc.in))
			if len(f.Errors) != 1 || len(f.Objects) != 0 {
				t.Fatalf("LoadBytes = %d objects, errors %v; want one error", len(f.Objects), f.Errors)
			}
			e := f.Errors[0]
			if !errors.Is(e, tc.class) {
				t.Errorf("error %v is not %v", e, tc.class)
			}
			got := Error{Line: e.Line, Kind: e.Kind, Name: e.Name, Field: e.Field}
			if got != tc.want || e.File != "x.yaml" || e.Message == "" {
				t.Errorf("error = %+v, want %+v in x.yaml with a message", *e, tc.want)
			}
		})
	}
}

// TestReadOnlyMetaMatchesValidation checks that the metadata fields the
// loader refuses are exactly those validation refuses as set by marshald,
// so a field added to ObjectMeta is not silently accepted or refused.
func TestReadOnlyMetaMatchesValidation(t *testing.T) {
	metaType := reflect.TypeFor[v1alpha1.ObjectMeta]()
	for i := range metaType.NumField() {
		f := metaType.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		t.Run(name, func(t *testing.T) {
			p := &v1alpha1.Profile{Metadata: v1alpha1.ObjectMeta{Name: "p"}}
			v := reflect.ValueOf(&p.Metadata).Elem().Field(i)
			switch x := v.Addr().Interface().(type) {
			case *string:
				*x = "x"
			case *int64:
				*x = 1
			case *map[string]string:
				*x = map[string]string{"a": "b"}
			case *time.Time:
				*x = time.Unix(1, 0)
			default:
				t.Fatalf("no test value for %s %s; extend this test", name, f.Type)
			}
			refused := false
			for _, fe := range p.Validate() {
				if fe.Path.String() == "metadata."+name && strings.Contains(fe.Message, "cannot be declared") {
					refused = true
				}
			}
			if _, readOnly := readOnlyMeta[name]; readOnly != refused {
				t.Errorf("metadata.%s: loader refuses it: %v, validation refuses it: %v", name, readOnly, refused)
			}
		})
	}
}

func TestSyntaxLine(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
	}{
		{name: "scanner_first_line", in: "a: b: c\n", want: 1},
		{name: "scanner_later_line", in: "a: 1\nb: 2\n  c: 3\n", want: 3},
		{name: "tab_indent", in: "a:\n\tb: 1\n", want: 2},
		{name: "parser_block", in: "a: 1\nb: 2\n- c\n", want: 3},
		{name: "parser_flow", in: "a: 1\nb: [1, 2\nc: 3\n", want: 2},
		{name: "end_of_input", in: "a: 1\nb: [\n", want: 2},
		{name: "unknown_anchor", in: "a: 1\n\nb: [*x, *nope]\n", want: 3},
		{name: "undefined_tag_handle", in: "a: 1\nb: !x!y 2\n", want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := LoadBytes("x.yaml", []byte(tc.in))
			if len(f.Errors) != 1 || !errors.Is(f.Errors[0], ErrSyntax) {
				t.Fatalf("LoadBytes(%q) errors = %v, want one syntax error", tc.in, f.Errors)
			}
			if got := f.Errors[0].Line; got != tc.want {
				t.Errorf("LoadBytes(%q) line = %d, want %d (%v)", tc.in, got, tc.want, f.Errors[0])
			}
		})
	}
}

func TestMergeSortsFiles(t *testing.T) {
	load := func(path, data string) File { return LoadBytes(path, []byte(data)) }
	// Given out of order; "a.yaml" sorts before "a/b.yaml" ('.' < '/').
	r := Merge([]File{
		load("a/b.yaml", profileYAML("p")),
		load("a.yaml", profileYAML("p")+"---\n"+hostYAML("h")),
	})
	var paths []string
	for _, f := range r.Files {
		paths = append(paths, f.Path)
	}
	if got, want := strings.Join(paths, " "), "a.yaml a/b.yaml"; got != want {
		t.Errorf("files = %s, want %s", got, want)
	}
	if len(r.Objects) != 2 || r.Objects[1].File != "a.yaml" {
		t.Errorf("objects = %v, want Host and Profile from a.yaml", r.Objects)
	}
	if len(r.Errors) != 2 || r.Errors[0].File != "a.yaml" || r.Errors[1].File != "a/b.yaml" {
		t.Errorf("errors = %v, want a conflict on a.yaml then a/b.yaml", r.Errors)
	}
}

// TestDecodeEquivalentForms checks that the forms YAML offers for one
// value all decode to it.
func TestDecodeEquivalentForms(t *testing.T) {
	const head = "apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: h}\nspec:\n  capacity:\n    tasks: "
	tests := []struct {
		name, value string
		want        int64
	}{
		{name: "decimal", value: "4096", want: 4096},
		{name: "underscores", value: "4_096", want: 4096},
		{name: "hex", value: "0x1000", want: 4096},
		{name: "octal", value: "0o10000", want: 4096},
		{name: "binary", value: "0b1000000000000", want: 4096},
		{name: "plus_sign", value: "+4096", want: 4096},
		{name: "tagged", value: "!!int 4096", want: 4096},
		{name: "max", value: "9223372036854775807", want: 1<<63 - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := LoadBytes("h.yaml", []byte(head+tc.value+"\n"))
			if len(f.Errors) > 0 {
				t.Fatalf("tasks: %s: %v", tc.value, f.Errors)
			}
			if got := *f.Objects[0].Object.(*v1alpha1.Host).Spec.Capacity.Tasks; got != tc.want {
				t.Errorf("tasks: %s = %d, want %d", tc.value, got, tc.want)
			}
		})
	}
}

// testdata/alias_bomb_valid.yaml is refused by the alias limit alone:
// with its aliases written out it is a valid manifest. So the limit is
// what its golden file, and the fuzz corpus seeded from testdata, test.
func TestAliasBombIsStoppedByTheAliasLimitAlone(t *testing.T) {
	data, err := os.ReadFile("testdata/alias_bomb_valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := LoadBytes("bomb.yaml", data)
	if len(f.Errors) != 1 || !errors.Is(f.Errors[0], ErrAlias) {
		t.Fatalf("alias bomb = %v, want only the alias limit", f.Errors)
	}
	anchored := regexp.MustCompile(`&h (\[[^\]]*\])`).FindSubmatch(data)
	if anchored == nil {
		t.Fatal("no anchor &h in the alias bomb")
	}
	expanded := bytes.ReplaceAll(bytes.Replace(data, []byte("&h "), nil, 1), []byte("*h"), anchored[1])
	if f := LoadBytes("expanded.yaml", expanded); len(f.Errors) > 0 || len(f.Objects) != 1 {
		t.Fatalf("the alias bomb written out = %d objects, errors %v; want one valid object", len(f.Objects), f.Errors)
	}
}

// A plain "<<" is a merge key only as the key of something to merge (a
// mapping or a list): anywhere else it is the string it reads as, which
// is how sigs.k8s.io/yaml, and so kubectl, writes the string "<<".
func TestPlainDoubleAngleIsAStringUnlessItMerges(t *testing.T) {
	const ws = "apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: w}\nspec:\n  root: /\n  profile: p\n  exec:\n"
	for _, tc := range []struct {
		name, in string
		want     func(*v1alpha1.Workspace) bool
	}{
		{"list_item", ws + "    argv0:\n    - <<\n", func(w *v1alpha1.Workspace) bool { return slices.Equal(w.Spec.Exec.Argv0, []string{"<<"}) }},
		{"key_of_a_string", ws + "    env:\n      <<: x\n", func(w *v1alpha1.Workspace) bool { return w.Spec.Exec.Env["<<"] == "x" }},
		{"value", ws + "    env:\n      A: <<\n", func(w *v1alpha1.Workspace) bool { return w.Spec.Exec.Env["A"] == "<<" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := LoadBytes("w.yaml", []byte(tc.in))
			if len(f.Errors) > 0 || len(f.Objects) != 1 {
				t.Fatalf("LoadBytes = %v, want one object", f.Errors)
			}
			if w := f.Objects[0].Object.(*v1alpha1.Workspace); !tc.want(w) {
				t.Errorf("loaded %+v", w.Spec.Exec)
			}
		})
	}
	for _, in := range []string{ws + "    env:\n      <<: {A: b}\n", ws + "    env:\n      <<: [{A: b}]\n"} {
		if f := LoadBytes("w.yaml", []byte(in)); len(f.Errors) != 1 || !errors.Is(f.Errors[0], ErrAlias) {
			t.Errorf("LoadBytes(%q) = %v, want the merge key refused", in, f.Errors)
		}
	}
}
