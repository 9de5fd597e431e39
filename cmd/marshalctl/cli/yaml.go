package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// jsonToYAML prints the JSON document data as YAML, as kubectl prints
// objects: keys sorted, two-space indentation, sequences not indented
// under their key, strings quoted only when YAML would read them as
// something else, numbers as Go's YAML libraries print them.
//
// kubectl goes through sigs.k8s.io/yaml and go-yaml v2; this writes the
// same text with go-yaml v3, which marshalctl links anyway for the
// loader, so that v2 and its package initialisation stay out of the
// binary. One difference is kept on purpose: a long string is printed on
// one line, where v2 folded it at 80 columns.
func jsonToYAML(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("converting JSON to YAML: %w", err)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(yamlNode(v)); err != nil {
		return nil, fmt.Errorf("converting JSON to YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("converting JSON to YAML: %w", err)
	}
	return b.Bytes(), nil
}

// yamlNode is the YAML node of a value decoded from JSON with UseNumber.
func yamlNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareKeys)
		for _, k := range keys {
			n.Content = append(n.Content, yamlString(k), yamlNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case string:
		return yamlString(v)
	case json.Number:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: yamlNumber(string(v))}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(v)}
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Value: "null"}
	}
}

// yamlString is a string's node, styled as v2 styles it. v3 quotes a
// string that YAML 1.2 reads as another type; v2 also quotes YAML 1.1's
// booleans (yes, on, …) and sexagesimal numbers (1:20), which older
// readers still take for them, and it writes a multi-line string that
// holds a tab quoted rather than as a literal block.
func yamlString(s string) *yaml.Node {
	if s == "<<" {
		// A merge key to v3 only, and printed plain by v2.
		return &yaml.Node{Kind: yaml.ScalarNode, Value: s}
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case strings.Contains(s, "\n"):
		if strings.Contains(s, "\t") {
			n.Style = yaml.DoubleQuotedStyle
		}
	case isYAML11Bool(s) || isSexagesimal(s):
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// yamlNumber is how go-yaml prints a JSON number it decoded: an integer
// as itself, another number as the shortest float that reads back the
// same (1.0 is 1, 1e3 is 1000), and one that fits no Go number as written.
func yamlNumber(s string) string {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return strconv.FormatUint(u, 10)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return s
}

func isYAML11Bool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// sexagesimal is go-yaml's pattern for YAML 1.1's base 60 numbers,
// compiled on first use: most runs print no YAML.
var sexagesimal = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)
})

func isSexagesimal(s string) bool {
	if s == "" || !(s[0] == '+' || s[0] == '-' || '0' <= s[0] && s[0] <= '9') || !strings.Contains(s, ":") {
		return false
	}
	return sexagesimal().MatchString(s)
}

// compareKeys orders mapping keys as go-yaml v2 does, and so kubectl:
// letters by code point and before anything else, and runs of digits by
// their value, so that a2 comes before a10. That order is not transitive
// for some keys that mix digit runs with leading zeros and letters (1,
// 01, 0a); v2 then prints them in an order that depends on map
// iteration, and this in one such order.
func compareKeys(a, b string) int {
	switch {
	case a == b:
		return 0
	case keyLess(a, b):
		return -1
	}
	return 1
}

// keyLess is go-yaml v2's order of string keys (keyList.Less).
func keyLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			continue
		}
		al, bl := unicode.IsLetter(ar[i]), unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			return bl
		}
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		var ai, bi int
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}
