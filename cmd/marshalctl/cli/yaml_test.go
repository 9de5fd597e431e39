package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"
)

// jsonToYAML must print what kubectl prints (sigs.k8s.io/yaml over
// go-yaml v2), byte for byte, except that it does not fold long strings.

// yamlScalars are strings at the edges of YAML's plain style and of its
// type resolution.
var yamlScalars = []string{
	"", " ", "a", "a b", " a", "a ", "-", "- a", "-a", ":", "a:", "a: b", "a:b", "?", "? a",
	"#", "a #b", "a#b", "'", `"`, `\`, "a'b", "\t", "a\tb", "\n", "a\n", "\na", "a\nb", "a\n\n", "a\n\tb", "\t\n",
	" a\nb", "a \nb", "é", "日本", "\u2028", "\x01", "{", "}", "[", "]", ",", "a,b",
	"&a", "*a", "!a", "!!str", "%", "@", "`", "|", ">", "<<", "=", ".", "...", "---", "- ",
	"y", "Y", "yes", "Yes", "YES", "n", "no", "NO", "on", "On", "off", "OFF", "true", "True",
	"TRUE", "false", "False", "null", "Null", "NULL", "~", ".inf", "-.inf", "+.INF", ".nan",
	"0", "1", "-1", "+1", "-0", "1.5", ".5", "5.", "1e3", "1E-3", "1_000", "0x1F", "0o17",
	"-0o17", "0b101", "-0b101", "0777", "08", "1:20", "-1:20:30.5", "1:60", "190:20:30",
	"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2025-03-01T11:59:56Z", "12:00",
	"9223372036854775808", "18446744073709551616", "1e400",
}

// yamlNumbers are JSON number literals, each an edge of go-yaml's
// integer and float handling.
var yamlNumbers = []string{
	"0", "-0", "1", "-1", "250", "268435456", "9223372036854775807", "-9223372036854775808",
	"9223372036854775808", "18446744073709551615", "18446744073709551616", "1.0", "1.5",
	"-0.0", "0.1", "1e3", "1E+3", "1e-7", "1e21", "1.7976931348623157e308", "1e400",
	"5e-324", "1e-400", "123456789012345678901234567890",
}

// yamlKeys are mapping keys whose order kubectl's sorting decides. None
// has a run of digits with a leading zero followed by a letter: v2's
// order is not transitive there (see compareKeys).
var yamlKeys = []string{
	"a", "b", "A", "Z", "a1", "a2", "a10", "a01", "a02", "a0", "a00", "1", "2", "10", "01",
	"a_b", "a-b", "a.b", "ab", "é", "_", "-", "", "yes", "spec", "status", "apiVersion",
	"kind", "max_live", "cpu_milli", "x1y", "x1z", "x01y", "a b",
}

func TestJSONToYAMLMatchesSigsYAML(t *testing.T) {
	tests := []struct {
		name string
		json string
	}{
		{"empty_object", `{}`},
		{"empty_list", `[]`},
		{"null", `null`},
		{"bool", `true`},
		{"top_level_string", `"a"`},
		{"nested_empty", `{"a":{},"b":[],"c":[{}],"d":[[]]}`},
		{"list_of_lists", `[[1,2],[3,[4]],[]]`},
		{"list_of_objects", `{"items":[{"a":1,"b":[{"c":null}]},{"d":"e"}]}`},
		{"object_in_list_in_list", `[[{"a":1,"b":2}]]`},
		{"multiline_in_list", `{"a":["x\ny","z\n"],"b":{"c":"p\n q"}}`},
		{"kubectl_list", `{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"x","labels":{"tier":"gold","team":"a"}},"status":{"conditions":[{"status":"True","type":"Ready"}]}}]}`},
	}
	for i, s := range yamlScalars {
		b, _ := json.Marshal(map[string]any{"k": s, "l": []string{s}})
		tests = append(tests, struct{ name, json string }{fmt.Sprintf("string_%d", i), string(b)})
		b, _ = json.Marshal(map[string]string{s: "v"})
		tests = append(tests, struct{ name, json string }{fmt.Sprintf("key_%d", i), string(b)})
	}
	for i, n := range yamlNumbers {
		tests = append(tests, struct{ name, json string }{fmt.Sprintf("number_%d", i), `{"n":` + n + `,"l":[` + n + `]}`})
	}
	keys, _ := json.Marshal(func() map[string]int {
		m := map[string]int{}
		for i, k := range yamlKeys {
			m[k] = i
		}
		return m
	}())
	tests = append(tests, struct{ name, json string }{"key_order", string(keys)})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkJSONToYAML(t, tc.json)
		})
	}
}

func TestJSONToYAMLMatchesSigsYAMLProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		checkJSONToYAML(t, drawJSON(t, 0))
	})
}

// drawJSON draws a JSON text whose YAML lines stay short of 80 columns,
// where go-yaml v2 would fold a string.
func drawJSON(t *rapid.T, depth int) string {
	kind := rapid.IntRange(0, 5).Draw(t, "kind")
	if depth >= 4 {
		kind %= 3
	}
	switch kind {
	case 0:
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(yamlScalars), 1, 3).Draw(t, "string"), "")
		b, _ := json.Marshal(s)
		return string(b)
	case 1:
		return rapid.SampledFrom(yamlNumbers).Draw(t, "number")
	case 2:
		return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "literal")
	case 3:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		items := make([]string, n)
		for i := range items {
			items[i] = drawJSON(t, depth+1)
		}
		return "[" + strings.Join(items, ",") + "]"
	default:
		keys := rapid.SliceOfNDistinct(rapid.OneOf(rapid.SampledFrom(yamlKeys), rapid.StringMatching(`[a-z_]{1,4}([1-9][0-9]?[a-z]?)?`)),
			0, 5, func(k string) string { return k }).Draw(t, "keys")
		fields := make([]string, len(keys))
		for i, k := range keys {
			b, _ := json.Marshal(k)
			fields[i] = string(b) + ":" + drawJSON(t, depth+1)
		}
		return "{" + strings.Join(fields, ",") + "}"
	}
}

func checkJSONToYAML(t interface {
	Helper()
	Fatalf(string, ...any)
}, data string) {
	t.Helper()
	want, err := yaml.JSONToYAML([]byte(data))
	if err != nil {
		t.Fatalf("sigs.k8s.io/yaml.JSONToYAML(%s): %v", data, err)
	}
	got, err := jsonToYAML([]byte(data))
	if err != nil {
		t.Fatalf("jsonToYAML(%s): %v", data, err)
	}
	if string(got) != string(want) {
		t.Fatalf("jsonToYAML(%s) =\n%s\nwant\n%s", data, got, want)
	}
}

// A long string stays on one line: v2 folded it at 80 columns, which
// made a long message or path hard to copy.
func TestJSONToYAMLDoesNotFold(t *testing.T) {
	long := strings.Repeat("word ", 30) + "end"
	got, err := jsonToYAML([]byte(`{"message":"` + long + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "message: " + long + "\n"; string(got) != want {
		t.Errorf("jsonToYAML = %q, want %q", got, want)
	}
}

func TestJSONToYAMLRejectsBadJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":}`, `[1,]`} {
		if got, err := jsonToYAML([]byte(in)); err == nil {
			t.Errorf("jsonToYAML(%q) = %q, want an error", in, got)
		}
	}
}
