package runner

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// The run request is written and its answer read by hand; encoding/json
// is the reference for both.

// wireStrings are strings at the edges of encoding/json's quoting.
var wireStrings = []string{
	"", "a", "web", "/usr/bin/claude", "a b", `"`, `\`, "/", "<", ">", "&", "a&&b", "\x00", "\x1f", "\x7f",
	"\b", "\f", "\n", "\r", "\t", "é", "日本", "\u2028", "\u2029", "\ufeff", "\U0001F600", "\xff", "a\xc3",
	"\xed\xa0\x80", "\ufffd", "=", "PATH=/bin:/usr/bin", strings.Repeat("x", 300),
}

var wireString = rapid.OneOf(
	rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(wireStrings), 0, 4).Draw(t, "pieces"), "")
	}),
	rapid.String(),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 16), func(b []byte) string { return string(b) }),
)

// plainString is a string encoding/json writes without an escape.
var plainString = rapid.StringMatching(`[-a-zA-Z0-9 /._=:+,é]{0,20}`)

// drawFields fills every field of the struct v points to with strings
// from str, failing on a field of a type it does not know: a field added
// to the wire types must be added to the hand-written codec, and this
// says so.
func drawFields(t *rapid.T, v any, str *rapid.Generator[string], nils bool) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f, name := rv.Field(i), rv.Type().Field(i).Name
		switch f.Interface().(type) {
		case string:
			f.SetString(str.Draw(t, name))
		case bool:
			f.SetBool(rapid.Bool().Draw(t, name))
		case int64:
			f.SetInt(rapid.OneOf(rapid.Int64(), rapid.Just[int64](0)).Draw(t, name))
		case []string:
			if nils && rapid.Bool().Draw(t, name+"_nil") {
				continue
			}
			f.Set(reflect.ValueOf(rapid.SliceOfN(str, 0, 5).Draw(t, name)))
		case [][]byte:
			if nils && rapid.Bool().Draw(t, name+"_nil") {
				continue
			}
			out := make([][]byte, rapid.IntRange(0, 5).Draw(t, name+"_len"))
			for j := range out {
				if !nils || !rapid.Bool().Draw(t, name+"_elem_nil") {
					out[j] = rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, name)
				}
			}
			f.Set(reflect.ValueOf(out))
		default:
			t.Fatalf("%T.%s is a %s, which the run codec does not know", v, name, f.Type())
		}
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
	for _, s := range wireStrings {
		check(t, s)
	}
	rapid.Check(t, func(t *rapid.T) { check(t, wireString.Draw(t, "s")) })
}

func TestAppendRunRequestMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		req  localapi.RunRequest
	}{
		{"empty", localapi.RunRequest{}},
		{"typical", localapi.RunRequest{Workspace: "web", Argv: []string{"claude"}, Env: [][]byte{[]byte("HOME=/root"), []byte("PATH=/bin")}}},
		{"everything", localapi.RunRequest{Workspace: "web", Argv: []string{"git", "status"}, PTY: true, TimeoutMS: 90000,
			Env: [][]byte{nil, {}, []byte("\xff\x00")}, Explain: true}},
		{"empty_lists", localapi.RunRequest{Argv: []string{}, Env: [][]byte{}}},
		{"negative_timeout", localapi.RunRequest{TimeoutMS: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkRunRequest(t, &tc.req) })
	}
	rapid.Check(t, func(t *rapid.T) {
		var req localapi.RunRequest
		drawFields(t, &req, wireString, true)
		checkRunRequest(t, &req)
	})
}

func checkRunRequest(t interface{ Fatalf(string, ...any) }, req *localapi.RunRequest) {
	want, err := json.Marshal(req)
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", req, err)
	}
	if got := appendRunRequest(nil, req); !bytes.Equal(got, want) {
		t.Fatalf("appendRunRequest(%+v) =\n%s\nwant\n%s", req, got, want)
	}
}

// Whatever the answer, decodeRunResult reads what json.Unmarshal reads,
// and fails where it fails.
func TestDecodeRunResultMatchesEncodingJSON(t *testing.T) {
	for _, answer := range runAnswers {
		t.Run(answer.name, func(t *testing.T) { checkDecodeRunResult(t, []byte(answer.json)) })
	}
	rapid.Check(t, func(t *rapid.T) {
		var p localapi.ExecPlan
		drawFields(t, &p, wireString, true)
		checkDecodeRunResult(t, daemonAnswer(t, &localapi.RunResult{Plan: &p}))
	})
}

// A plan marshald writes is read without encoding/json, every field of
// it.
func TestParsePlanReadsEveryField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var want localapi.ExecPlan
		drawFields(t, &want, plainString, false)
		answer := daemonAnswer(t, &localapi.RunResult{Plan: &want})
		got, ok := parsePlan(answer)
		if !ok {
			t.Fatalf("parsePlan(%s) fell back to encoding/json", answer)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("parsePlan(%s) = %+v, want %+v", answer, got, &want)
		}
	})
}

// runAnswers are answers at the edges of what parsePlan reads.
var runAnswers = []struct{ name, json string }{
	{"plan", `{"plan":{"path":"/bin/true","argv":["true"],"env":["SE9NRT0vcm9vdA=="],"dir":"/src","id":"3f9a","scope":"s.scope"}}` + "\n"},
	{"plan_all_fields", `{"plan":{"path":"/p","argv":[],"env":[],"dir":"/","id":"i","scope":"s","attempt":"a","unaccounted":"u"}}`},
	{"plan_spaced", " { \"plan\" : { \"path\" : \"/p\" , \"argv\" : [ \"a\" , \"b\" ] } } \n\t"},
	{"plan_empty", `{"plan":{}}`},
	{"plan_duplicate_key", `{"plan":{"path":"/a","path":"/b","argv":["x"],"argv":["y"]}}`},
	{"plan_null", `{"plan":null}`},
	{"plan_argv_null", `{"plan":{"argv":null}}`},
	{"plan_env_null_entry", `{"plan":{"env":[null]}}`},
	{"plan_env_empty_entry", `{"plan":{"env":[""]}}`},
	{"plan_env_bad_base64", `{"plan":{"env":["!!"]}}`},
	{"plan_env_unpadded", `{"plan":{"env":["YQ"]}}`},
	{"plan_escape", `{"plan":{"path":"/a\u0026b","argv":["\"q\""]}}`},
	{"plan_raw_unicode", `{"plan":{"path":"/é","argv":["` + "\u2028" + `"]}}`},
	{"plan_invalid_utf8", "{\"plan\":{\"path\":\"\xff\"}}"},
	{"plan_control_char", "{\"plan\":{\"path\":\"a\tb\"}}"},
	{"plan_key_case", `{"plan":{"Path":"/p"}}`},
	{"plan_unknown_key", `{"plan":{"path":"/p","cgroup":"x"}}`},
	{"plan_number", `{"plan":{"path":1}}`},
	{"plan_and_refusal", `{"plan":{"path":"/p"},"refusal":{"code":"INTERNAL"}}`},
	{"refusal", `{"refusal":{"code":"WORKSPACE_BUSY","detail":"live process limit reached (8 of 8)","process":42,"state":"not_asked"}}`},
	{"explain", `{"explain":{"meaning":{"argv":["x"]},"digest":"d"}}`},
	{"empty_object", `{}`},
	{"trailing_garbage", `{"plan":{"path":"/p"}}x`},
	{"two_documents", `{"plan":{"path":"/p"}}{}`},
	{"truncated", `{"plan":{"path":"/p"`},
	{"unterminated_string", `{"plan":{"path":"/p}}`},
	{"missing_comma", `{"plan":{"path":"/p" "dir":"/"}}`},
	{"leading_comma", `{"plan":{,"path":"/p"}}`},
	{"trailing_comma", `{"plan":{"path":"/p",}}`},
	{"array_trailing_comma", `{"plan":{"argv":["a",]}}`},
	{"empty", ``},
	{"null", `null`},
}

// daemonAnswer encodes res as marshald does.
func daemonAnswer(t interface{ Fatalf(string, ...any) }, res *localapi.RunResult) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(res); err != nil {
		t.Fatalf("encoding %+v: %v", res, err)
	}
	return b.Bytes()
}

func checkDecodeRunResult(t interface{ Fatalf(string, ...any) }, answer []byte) {
	var want localapi.RunResult
	wantErr := json.Unmarshal(answer, &want)
	got, err := decodeRunResult(answer)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("decodeRunResult(%q) error = %v, want %v", answer, err, wantErr)
	case err == nil && !reflect.DeepEqual(got, &want):
		t.Fatalf("decodeRunResult(%q) = %+v, want %+v", answer, got, &want)
	}
}

func FuzzDecodeRunResult(f *testing.F) {
	for _, answer := range runAnswers {
		f.Add([]byte(answer.json))
	}
	f.Fuzz(func(t *testing.T, answer []byte) { checkDecodeRunResult(t, answer) })
}

// BenchmarkRunWire compares the codecs warm. What marshalctl run gains
// is in a process that just started, where encoding/json first reflects
// on the types; BenchmarkRunLatency in package test measures that.
func BenchmarkRunWire(b *testing.B) {
	env := make([][]byte, 40)
	for i := range env {
		env[i] = []byte("VARIABLE_" + strings.Repeat("x", i) + "=some value that is typical of an environment")
	}
	req := &localapi.RunRequest{Workspace: "web", Argv: []string{"claude", "--resume"}, Env: env}
	answer, _ := json.Marshal(localapi.RunResult{Plan: &localapi.ExecPlan{Path: "/usr/bin/claude", Argv: req.Argv,
		Env: env, Dir: "/src/web", ID: "3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c", Scope: "marshal-coder-3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c.scope"}})
	b.Run("encode_by_hand", func(b *testing.B) {
		for b.Loop() {
			appendRunRequest(nil, req)
		}
	})
	b.Run("encode_encoding_json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(req)
		}
	})
	b.Run("decode_by_hand", func(b *testing.B) {
		for b.Loop() {
			if _, ok := parsePlan(answer); !ok {
				b.Fatal("fell back")
			}
		}
	})
	b.Run("decode_encoding_json", func(b *testing.B) {
		for b.Loop() {
			var res localapi.RunResult
			json.Unmarshal(answer, &res)
		}
	})
}
