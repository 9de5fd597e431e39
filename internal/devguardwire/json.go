package devguardwire

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The request decoder reads JSON as DevGuard's serde_json does, which
// encoding/json does not: keys match exactly (encoding/json folds case),
// a key twice is an error (encoding/json keeps the last), a string must
// be valid UTF-8 without a lone surrogate escape (encoding/json replaces
// either by U+FFFD), and an integer is digits only. So the frame is
// parsed here into a small tree, and the decoders read the tree.

// kind is the type of a JSON value.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// value is a parsed JSON value. num holds a number's literal text.
type value struct {
	kind kind
	b    bool
	str  string
	num  string
	arr  []value
	obj  []member
}

type member struct {
	key string
	val value
}

// maxDepth bounds nesting, as serde_json's recursion limit does.
const maxDepth = 128

// parseJSON parses data, one JSON value and nothing after it but
// whitespace.
func parseJSON(data []byte) (value, error) {
	if !utf8.Valid(data) {
		return value{}, fmt.Errorf("not UTF-8: %w", ErrMalformed)
	}
	p := parser{data: data}
	v, err := p.value(0)
	if err != nil {
		return value{}, err
	}
	p.space()
	if p.i != len(p.data) {
		return value{}, p.fail("trailing characters")
	}
	return v, nil
}

type parser struct {
	data []byte
	i    int
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("%s at byte %d: %w", what, p.i, ErrMalformed)
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) literal(word string) bool {
	if len(p.data)-p.i >= len(word) && string(p.data[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return false
}

func (p *parser) value(depth int) (value, error) {
	if depth > maxDepth {
		return value{}, p.fail("nested too deep")
	}
	p.space()
	if p.i >= len(p.data) {
		return value{}, p.fail("unexpected end")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		return value{kind: kindString, str: s}, err
	case c == '-' || '0' <= c && c <= '9':
		n, err := p.number()
		return value{kind: kindNumber, num: n}, err
	case p.literal("true"):
		return value{kind: kindBool, b: true}, nil
	case p.literal("false"):
		return value{kind: kindBool}, nil
	case p.literal("null"):
		return value{kind: kindNull}, nil
	}
	return value{}, p.fail("unexpected character")
}

func (p *parser) object(depth int) (value, error) {
	p.i++ // {
	v := value{kind: kindObject}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return value{}, p.fail("expected a key")
		}
		k, err := p.string()
		if err != nil {
			return value{}, err
		}
		for _, m := range v.obj {
			if m.key == k {
				return value{}, fmt.Errorf("duplicate field %q: %w", k, ErrMalformed)
			}
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return value{}, p.fail("expected ':'")
		}
		p.i++
		val, err := p.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		v.obj = append(v.obj, member{k, val})
		p.space()
		if p.i >= len(p.data) {
			return value{}, p.fail("unexpected end")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return v, nil
		default:
			return value{}, p.fail("expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (value, error) {
	p.i++ // [
	v := value{kind: kindArray}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		e, err := p.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		v.arr = append(v.arr, e)
		p.space()
		if p.i >= len(p.data) {
			return value{}, p.fail("unexpected end")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return value{}, p.fail("expected ',' or ']'")
		}
	}
}

// number reads a JSON number's literal, as the grammar allows it.
func (p *parser) number() (string, error) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.data) && '0' <= p.data[p.i] && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case digits() == 0:
		return "", p.fail("expected a digit")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return "", p.fail("expected a digit")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return "", p.fail("expected a digit")
		}
	}
	return string(p.data[start:p.i]), nil
}

// string reads a JSON string; the data is known to be UTF-8.
func (p *parser) string() (string, error) {
	p.i++ // "
	var out []byte
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := string(p.data[start:p.i])
			if out != nil {
				s = string(append(out, p.data[start:p.i]...))
			}
			p.i++
			return s, nil
		case c < 0x20:
			return "", p.fail("control character in a string")
		case c == '\\':
			out = append(out, p.data[start:p.i]...)
			p.i++
			if p.i >= len(p.data) {
				return "", p.fail("unexpected end")
			}
			e := p.data[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					// Only a high surrogate followed by a low one is a
					// character; serde_json refuses a lone one.
					if r >= 0xdc00 || !p.literal(`\u`) {
						return "", p.fail("lone surrogate")
					}
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						return "", p.fail("lone surrogate")
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", p.fail("invalid escape")
			}
			start = p.i
		default:
			p.i++
		}
	}
	return "", p.fail("unterminated string")
}

func (p *parser) hex4() (rune, error) {
	if len(p.data)-p.i < 4 {
		return 0, p.fail("unexpected end")
	}
	n, err := strconv.ParseUint(string(p.data[p.i:p.i+4]), 16, 16)
	if err != nil {
		return 0, p.fail("invalid \\u escape")
	}
	p.i += 4
	return rune(n), nil
}
