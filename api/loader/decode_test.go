package loader

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPlansCoverAPI checks that every field a manifest may set has a type
// the decoder fills, so a change to the API types cannot leave one that a
// manifest is refused for.
func TestPlansCoverAPI(t *testing.T) {
	seen := map[*plan]bool{}
	var walk func(p *plan, path string)
	walk = func(p *plan, path string) {
		if seen[p] {
			return
		}
		seen[p] = true
		if p.kind == planUnsupported {
			t.Errorf("%s: type %s cannot be decoded", path, p.typ)
		}
		for _, f := range p.fields {
			if f.readOnly == "" {
				walk(f.plan, path+"."+f.name)
			}
		}
		if p.elem != nil {
			walk(p.elem, path+"[]")
		}
	}
	for kind, p := range kindPlans() {
		walk(p, kind)
	}
}

// decodeTest is a struct with the shapes the API types do not use today.
type decodeTest struct {
	Small    int8              `json:"small"`
	Count    uint16            `json:"count"`
	Ratio    float64           `json:"ratio"`
	ByNumber map[int]string    `json:"by_number"`
	Nested   []map[string]bool `json:"nested"`
	Skipped  string            `json:"-"`
	Embedded `json:",inline"`
	Named    Embedded `json:"named"`
}

type Embedded struct {
	Inner string `json:"inner"`
}

func decodeInto(t *testing.T, text string, v any) []*Error {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	b := planBuilder{cache: map[reflect.Type]*plan{}}
	d := decoder{rootLine: 1, docLine: 1}
	rv := reflect.ValueOf(v).Elem()
	d.value(doc.Content[0], rv, b.plan(rv.Type()))
	return d.errs
}

func TestDecodeShapes(t *testing.T) {
	tests := []struct {
		name, in string
		want     decodeTest
		errs     []string
	}{
		{
			name: "values",
			in:   "small: -128\ncount: 65535\ninner: a\nnamed: {inner: b}\nnested: [{x: true}, {}]\n",
			want: decodeTest{Small: -128, Count: 65535, Embedded: Embedded{Inner: "a"}, Named: Embedded{Inner: "b"},
				Nested: []map[string]bool{{"x": true}, nil}},
		},
		{
			name: "overflow_small_types",
			in:   "small: 128\ncount: 65536\n",
			errs: []string{
				"1 small: must be an integer that fits in 8 bits, got 128",
				"2 count: must be an integer that fits in 16 bits, got 65536",
			},
		},
		{
			name: "negative_unsigned",
			in:   "count: -1\n",
			errs: []string{"1 count: must be a non-negative integer, got integer -1"},
		},
		{
			name: "unsupported_types",
			in:   "ratio: 1.5\nby_number: {1: a}\n",
			errs: []string{
				"1 ratio: cannot be set in a manifest (float64)",
				"2 by_number: cannot be set in a manifest (map[int]string)",
			},
		},
		{
			name: "skipped_and_go_names_unknown",
			in:   "Skipped: x\nSmall: 1\nEmbedded: {}\n",
			errs: []string{
				`1 Skipped: unknown field (known fields: small, count, ratio, by_number, nested, inner, named)`,
				`2 Small: unknown field (did you mean "small"?)`,
				`3 Embedded: unknown field (known fields: small, count, ratio, by_number, nested, inner, named)`,
			},
		},
		{
			name: "nested_errors",
			in:   "nested:\n  - {x: yes}\n  - []\n",
			errs: []string{
				`2 nested[0][x]: must be true or false, got string "yes"`,
				`3 nested[1]: must be a mapping, got a list`,
			},
		},
		{
			name: "keys",
			in:   "? [a]\n: 1\n~: 2\nnested: [{~: true}]\n",
			errs: []string{
				`1 : keys must be strings, got a list`,
				`3 : keys must be strings, got null`,
				`4 nested[0]: keys must be strings, got null`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got decodeTest
			errs := decodeInto(t, tc.in, &got)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, strings.TrimSpace(strings.Join([]string{strconv.Itoa(e.Line), e.Field + ":", e.Message}, " ")))
			}
			if strings.Join(msgs, "\n") != strings.Join(tc.errs, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(tc.errs, "\n"))
			}
			if len(tc.errs) == 0 && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}
