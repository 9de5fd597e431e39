package main

import (
	"testing"

	"sigs.k8s.io/yaml"
)

func TestJSONKeepsOrderAndText(t *testing.T) {
	in := `{"z": 1, "a": {"y": [true, null, "a < b & c"], "b": 9223372036854775807}, "m": {}, "l": []}`
	v, err := parseJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "z": 1,
  "a": {
    "y": [
      true,
      null,
      "a < b & c"
    ],
    "b": 9223372036854775807
  },
  "m": {},
  "l": []
}
`
	if string(got) != want {
		t.Errorf("marshalJSON(parseJSON(%s)) =\n%s\nwant\n%s", in, got, want)
	}
	if _, err := parseJSON([]byte(`{"a": 1} {}`)); err == nil {
		t.Error("parseJSON accepted trailing data")
	}
}

func TestYAMLReadsBackAsTheSameJSON(t *testing.T) {
	v, err := parseJSON([]byte(`{"b": "true", "a": ["1", 1, 1.5, "", null, "a: b", "#x", "é µs"], "c": {"d": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	y, err := marshalYAML(v, "notice")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseJSON(j)
	if err != nil {
		t.Fatal(err)
	}
	// sigs.k8s.io/yaml sorts keys; compare as sets of values.
	if !sameJSON(sorted(back), sorted(v)) {
		t.Errorf("YAML\n%s\nreads back as %s", y, j)
	}
	if string(y[:9]) != "# notice\n" {
		t.Errorf("YAML starts %q, want the notice", y[:9])
	}
}

// sorted returns v with the keys of every object sorted.
func sorted(v any) any {
	switch v := v.(type) {
	case *object:
		c := clone(v).(*object)
		c.sortKeys(nil)
		for _, k := range c.keys {
			c.vals[k] = sorted(c.vals[k])
		}
		return c
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = sorted(e)
		}
		return out
	}
	return v
}
