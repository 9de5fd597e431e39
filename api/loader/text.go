package loader

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkText finds the first byte that keeps data from being YAML text: an
// invalid UTF-8 sequence or a character YAML does not allow (C0 and C1
// controls other than tab, newline, carriage return and NEL; U+FFFE,
// U+FFFF). It returns the line of that byte and what is wrong, or 0 and ""
// when data is fine. The parser rejects the same bytes, but without a line.
func checkText(data []byte) (line int, msg string) {
	line = 1
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				line++
			case c == '\r':
				if i+1 == len(data) || data[i+1] != '\n' {
					line++
				}
			case c == '\t':
			case c < 0x20 || c == 0x7f:
				return line, fmt.Sprintf("control character %U is not allowed", c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return line, fmt.Sprintf("invalid UTF-8 (byte 0x%02x); manifests must be UTF-8 text", c)
		case r <= 0x9f && r != 0x85, r == 0xfffe, r == 0xffff:
			return line, fmt.Sprintf("control character %U is not allowed", r)
		case r == 0x85 || r == 0x2028 || r == 0x2029:
			line++
		}
		i += size
	}
	return 0, ""
}

// parserProblems are the messages of the YAML parser (as opposed to its
// scanner). The parser reports their line 0-based, the scanner 1-based.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxLine turns a parse error into its 1-based line and message. The
// parser writes "yaml: line N: problem", omits the line when it is the
// first, and writes no line at all for an unknown anchor, which is then
// looked up in data.
func syntaxLine(err error, data []byte) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	line = 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, problem, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, problem
				if parserProblems[msg] {
					line++
				}
			}
		}
	} else if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		line = aliasLine(data, strings.TrimSuffix(name, "' referenced"))
	}
	// A problem at the end of the input is reported on the line after the
	// final newline; report it on the last line instead.
	if last := lineCount(data); line > last {
		line = last
	}
	return line, msg
}

// lineCount is the number of lines of data, a final line break not
// starting another one.
func lineCount(data []byte) int {
	n := lineBreaks(data)
	if !endsWithBreak(data) {
		n++
	}
	return n
}

func endsWithBreak(data []byte) bool {
	for _, b := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
		if bytes.HasSuffix(data, []byte(b)) {
			return true
		}
	}
	return false
}

// lineBreaks counts the line breaks in data as YAML does: CR LF, CR, LF,
// NEL, LS and PS each end a line.
func lineBreaks(data []byte) int {
	n := 0
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '\n':
			n++
		case c == '\r':
			if i+1 == len(data) || data[i+1] != '\n' {
				n++
			}
		case c == 0xc2 && i+1 < len(data) && data[i+1] == 0x85:
			n++
		case c == 0xe2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xa8 || data[i+2] == 0xa9):
			n++
		}
	}
	return n
}

// aliasLine is the line of the first alias *name in data, or 0.
func aliasLine(data []byte, name string) int {
	ref := "*" + name
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(ref))
		if i < 0 {
			return 0
		}
		i += off
		end := i + len(ref)
		if end == len(data) || strings.IndexByte(" \t\r\n,]}", data[end]) >= 0 {
			return 1 + lineBreaks(data[:i])
		}
		off = end
	}
}

// normalizeJSON rewrites the string escapes JSON has and the YAML parser
// lacks, so a .json file reads as JSON does: \/ becomes /, a UTF-16
// surrogate pair \uD83D\uDE00 becomes \U0001F600 and a lone surrogate
// becomes \uFFFD (as encoding/json decodes it). Lines are unchanged.
func normalizeJSON(data []byte) []byte {
	if !bytes.Contains(data, []byte(`\/`)) && !hasSurrogateEscape(data) {
		return data
	}
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString || c != '\\' || i+1 == len(data) {
			if c == '"' {
				inString = !inString
			}
			out = append(out, c)
			continue
		}
		next := data[i+1]
		switch {
		case next == '/':
			out = append(out, '/')
			i++
		case next == 'u':
			r1, ok := hex4(data[i+2:])
			if !ok || !utf16.IsSurrogate(r1) {
				out = append(out, c, next)
				i++
				break
			}
			if len(data) >= i+12 && data[i+6] == '\\' && data[i+7] == 'u' {
				if r2, ok := hex4(data[i+8:]); ok {
					if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
						out = fmt.Appendf(out, `\U%08X`, r)
						i += 11
						break
					}
				}
			}
			out = append(out, `\uFFFD`...)
			i += 5
		default:
			out = append(out, c, next)
			i++
		}
	}
	return out
}

// hasSurrogateEscape reports whether data holds \uD800 to \uDFFF in any
// letter case.
func hasSurrogateEscape(data []byte) bool {
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(`\u`))
		if i < 0 {
			return false
		}
		off += i + 2
		if off < len(data) && (data[off] == 'd' || data[off] == 'D') {
			return true
		}
	}
}

// hex4 reads four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(n), err == nil
}
