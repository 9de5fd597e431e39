package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// object is a JSON object that keeps its keys in the order they were set,
// so generated files list fields in the order the Go types declare them.
// Values are *object, []any, string, json.Number, bool or nil.
type object struct {
	keys []string
	vals map[string]any
}

// obj returns an object of the key/value pairs kv, in order.
func obj(kv ...any) *object {
	o := &object{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

func (o *object) has(key string) bool {
	_, ok := o.vals[key]
	return ok
}

func (o *object) get(key string) any { return o.vals[key] }

// set sets key to v, keeping the key's place when it is already set.
func (o *object) set(key string, v any) *object {
	if !o.has(key) {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
	return o
}

func (o *object) del(key string) {
	if !o.has(key) {
		return
	}
	delete(o.vals, key)
	o.keys = slices.DeleteFunc(o.keys, func(k string) bool { return k == key })
}

// sub returns the object at key, or nil when key is absent or not an
// object.
func (o *object) sub(key string) *object {
	s, _ := o.vals[key].(*object)
	return s
}

// str returns the string at key, or "".
func (o *object) str(key string) string {
	s, _ := o.vals[key].(string)
	return s
}

// strings returns the list of strings at key.
func (o *object) strings(key string) []string {
	list, _ := o.vals[key].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// sortKeys orders the keys by rank, then by name; keys rank does not know
// go last.
func (o *object) sortKeys(rank map[string]int) {
	slices.SortStableFunc(o.keys, func(a, b string) int {
		ra, oka := rank[a]
		rb, okb := rank[b]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a, b)
	})
}

// clone returns a deep copy of v.
func clone(v any) any {
	switch v := v.(type) {
	case *object:
		c := &object{keys: slices.Clone(v.keys), vals: make(map[string]any, len(v.vals))}
		for k, e := range v.vals {
			c.vals[k] = clone(e)
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, e := range v {
			c[i] = clone(e)
		}
		return c
	}
	return v
}

// parseJSON reads one JSON value, keeping the order of object keys and
// numbers as written.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := obj()
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(key.(string), v)
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	return tok, nil
}

// marshalJSON writes v as indented JSON with a final newline. Unlike
// encoding/json it keeps object keys in order and leaves <, > and &
// unescaped, so descriptions read as written.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, v, "\n"); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any, nl string) error {
	const indent = "  "
	switch v := v.(type) {
	case *object:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(nl + indent)
			writeString(b, k)
			b.WriteString(": ")
			if err := writeJSON(b, v.vals[k], nl+indent); err != nil {
				return err
			}
		}
		b.WriteString(nl + "}")
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(nl + indent)
			if err := writeJSON(b, e, nl+indent); err != nil {
				return err
			}
		}
		b.WriteString(nl + "]")
	case string:
		writeString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		fmt.Fprint(b, v)
	case nil:
		b.WriteString("null")
	default:
		return fmt.Errorf("cannot write %T as JSON", v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	// A string always encodes; Encode ends it with a newline.
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1)
}

// marshalYAML writes v as a YAML document under a head comment, keeping
// the order of object keys.
func marshalYAML(v any, comment string) ([]byte, error) {
	n, err := yamlNode(v)
	if err != nil {
		return nil, err
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: comment, Content: []*yaml.Node{n}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case *object:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range v.keys {
			val, err := yamlNode(v.vals[k])
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, val)
		}
		return n, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			val, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, val)
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("cannot write %T as YAML", v)
}
