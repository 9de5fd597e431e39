package runner

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// The run request is the one request between marshalctl's start and the
// agent's exec, so its JSON is written, and a plan read, without
// encoding/json: in a process that just started, encoding/json's first
// use of these types, reflection and all, took about 0.2 ms of every
// launch, against under 0.1 ms by hand. What is written is byte for byte
// what json.Marshal writes, and anything but a plain plan is read by
// encoding/json; the tests hold both to that.

// appendRunRequest appends req as json.Marshal encodes it.
func appendRunRequest(b []byte, req *localapi.RunRequest) []byte {
	// Room for all of it unless strings need escaping.
	size := 96 + len(req.Workspace)
	for _, a := range req.Argv {
		size += len(a) + 3
	}
	for _, kv := range req.Env {
		size += base64.StdEncoding.EncodedLen(len(kv)) + 3
	}
	b = slices.Grow(b, size)
	b = append(b, `{"workspace":`...)
	b = appendJSONString(b, req.Workspace)
	b = append(b, `,"argv":`...)
	if req.Argv == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, a := range req.Argv {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a)
		}
		b = append(b, ']')
	}
	b = append(b, `,"pty":`...)
	b = strconv.AppendBool(b, req.PTY)
	if req.TimeoutMS != 0 {
		b = append(b, `,"timeoutMS":`...)
		b = strconv.AppendInt(b, req.TimeoutMS, 10)
	}
	b = append(b, `,"env":`...)
	if req.Env == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, kv := range req.Env {
			if i > 0 {
				b = append(b, ',')
			}
			if kv == nil {
				b = append(b, "null"...)
				continue
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, kv)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	if req.Explain {
		b = append(b, `,"explain":true`...)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes it: HTML's
// <, > and & escaped, U+2028 and U+2029 escaped, invalid UTF-8 replaced.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeRunResult decodes marshald's answer to a run.
func decodeRunResult(data []byte) (*localapi.RunResult, error) {
	if p, ok := parsePlan(data); ok {
		return &localapi.RunResult{Plan: p}, nil
	}
	var res localapi.RunResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("reading marshald's answer: %w", err)
	}
	return &res, nil
}

// parsePlan reads an answer that is only a plan, written as
// encoding/json writes one, and reports false for anything else: another
// answer, a key it does not know, a null, a string with an escape or a
// byte that is not printable UTF-8. encoding/json then reads it.
func parsePlan(data []byte) (*localapi.ExecPlan, bool) {
	c := planCursor{rest: data}
	p := &localapi.ExecPlan{}
	if !c.literal("{") || !c.key("plan") || !c.literal("{") {
		return nil, false
	}
	for first := true; !c.literal("}"); first = false {
		if !first && !c.literal(",") {
			return nil, false
		}
		k, ok := c.string()
		if !ok || !c.literal(":") {
			return nil, false
		}
		switch k {
		case "path":
			p.Path, ok = c.string()
		case "dir":
			p.Dir, ok = c.string()
		case "id":
			p.ID, ok = c.string()
		case "scope":
			p.Scope, ok = c.string()
		case "attempt":
			p.Attempt, ok = c.string()
		case "unaccounted":
			p.Unaccounted, ok = c.string()
		case "argv":
			p.Argv, ok = c.stringArray()
		case "env":
			p.Env, ok = c.bytesArray()
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	if !c.literal("}") {
		return nil, false
	}
	c.space()
	return p, len(c.rest) == 0
}

// planCursor is parsePlan's position in the answer.
type planCursor struct {
	rest []byte
}

func (c *planCursor) space() {
	for len(c.rest) > 0 && (c.rest[0] == ' ' || c.rest[0] == '\t' || c.rest[0] == '\n' || c.rest[0] == '\r') {
		c.rest = c.rest[1:]
	}
}

// literal consumes s, after any space.
func (c *planCursor) literal(s string) bool {
	c.space()
	if len(c.rest) < len(s) || string(c.rest[:len(s)]) != s {
		return false
	}
	c.rest = c.rest[len(s):]
	return true
}

func (c *planCursor) key(k string) bool {
	s, ok := c.string()
	return ok && s == k && c.literal(":")
}

// string consumes a string without escapes that is valid UTF-8.
func (c *planCursor) string() (string, bool) {
	if !c.literal(`"`) {
		return "", false
	}
	ascii := true
	for i, ch := range c.rest {
		switch {
		case ch == '"':
			s := c.rest[:i]
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			c.rest = c.rest[i+1:]
			return string(s), true
		case ch < ' ' || ch == '\\':
			return "", false
		case ch >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// array consumes an array, calling elem for each element; an empty
// array is made, as encoding/json makes it.
func (c *planCursor) array(elem func() bool) bool {
	if !c.literal("[") {
		return false
	}
	for first := true; !c.literal("]"); first = false {
		if !first && !c.literal(",") {
			return false
		}
		if !elem() {
			return false
		}
	}
	return true
}

func (c *planCursor) stringArray() ([]string, bool) {
	out := []string{}
	ok := c.array(func() bool {
		s, ok := c.string()
		out = append(out, s)
		return ok
	})
	return out, ok
}

// bytesArray consumes an array of base64 strings, as encoding/json
// writes [][]byte.
func (c *planCursor) bytesArray() ([][]byte, bool) {
	out := [][]byte{}
	ok := c.array(func() bool {
		s, ok := c.string()
		if !ok {
			return false
		}
		b, err := base64.StdEncoding.DecodeString(s)
		out = append(out, b)
		return err == nil
	})
	return out, ok
}
