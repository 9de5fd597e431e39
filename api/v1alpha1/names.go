package v1alpha1

import (
	"strconv"
	"strings"
)

// The checks below are Kubernetes' own name checks (apimachinery's
// IsDNS1123Label, IsQualifiedName and IsValidLabelValue), message for
// message, so that a manifest is judged and explained as kubectl would.
// They are written out here, without regular expressions, because this
// package is linked into every marshal binary and apimachinery's
// validation packages cost each of them startup time (package init and
// a larger binary) on every run.

// MaxNameLength is the longest object name: a DNS (RFC 1123) label.
const MaxNameLength = 63

const (
	maxSubdomainLength  = 253
	maxLabelKeyLength   = 63
	maxLabelValueLength = 63

	dns1123LabelFmt     = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	dns1123LabelErrMsg  = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
	dns1123SubdomainFmt = dns1123LabelFmt + "(\\." + dns1123LabelFmt + ")*"
	dns1123SubdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
	labelKeyFmt         = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
	labelKeyErrMsg      = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	labelValueFmt       = "(" + labelKeyFmt + ")?"
	labelValueErrMsg    = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)

// isDNS1123Label reports what keeps value from being a lowercase RFC 1123
// label, or nil.
func isDNS1123Label(value string) []string {
	var errs []string
	if len(value) > MaxNameLength {
		// Kubernetes says characters here and bytes in the label checks;
		// both count bytes.
		errs = append(errs, "must be no more than "+strconv.Itoa(MaxNameLength)+" characters")
	}
	if !isLabelShaped(value, isLowerAlnum, isLowerAlnumDash) {
		if isDNS1123Subdomain(value) {
			// Only the dots are wrong.
			errs = append(errs, "must not contain dots")
		} else {
			errs = append(errs, regexError(dns1123LabelErrMsg, dns1123LabelFmt, "my-name", "123-abc"))
		}
	}
	return errs
}

// isQualifiedName reports what keeps value from being a label key (an
// optional DNS subdomain prefix and '/', then a name), or nil.
func isQualifiedName(value string) []string {
	var errs []string
	var name string
	switch prefix, rest, found := strings.Cut(value, "/"); {
	case !found:
		name = value
	case strings.Contains(rest, "/"):
		return append(errs, "a valid label key "+regexError(labelKeyErrMsg, labelKeyFmt, "MyName", "my.name", "123-abc")+
			" with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
	default:
		name = rest
		switch {
		case prefix == "":
			errs = append(errs, "prefix part must be non-empty")
		default:
			if len(prefix) > maxSubdomainLength {
				errs = append(errs, "prefix part must be no more than "+strconv.Itoa(maxSubdomainLength)+" bytes")
			}
			if !isDNS1123Subdomain(prefix) {
				errs = append(errs, "prefix part "+regexError(dns1123SubdomainMsg, dns1123SubdomainFmt, "example.com"))
			}
		}
	}
	if name == "" {
		errs = append(errs, "name part must be non-empty")
	} else if len(name) > maxLabelKeyLength {
		errs = append(errs, "name part must be no more than "+strconv.Itoa(maxLabelKeyLength)+" bytes")
	}
	if !isLabelShaped(name, isAlnum, isLabelKeyByte) {
		errs = append(errs, "name part "+regexError(labelKeyErrMsg, labelKeyFmt, "MyName", "my.name", "123-abc"))
	}
	return errs
}

// isLabelValue reports what keeps value from being a label value, or
// nil.
func isLabelValue(value string) []string {
	var errs []string
	if len(value) > maxLabelValueLength {
		errs = append(errs, "must be no more than "+strconv.Itoa(maxLabelValueLength)+" bytes")
	}
	if value != "" && !isLabelShaped(value, isAlnum, isLabelKeyByte) {
		errs = append(errs, regexError(labelValueErrMsg, labelValueFmt, "MyValue", "my_value", "12345"))
	}
	return errs
}

// isDNS1123Subdomain reports whether value is lowercase RFC 1123 labels
// joined by dots, whatever its length.
func isDNS1123Subdomain(value string) bool {
	for label := range strings.SplitSeq(value, ".") {
		if !isLabelShaped(label, isLowerAlnum, isLowerAlnumDash) {
			return false
		}
	}
	return true
}

// isLabelShaped reports whether s is not empty, starts and ends with a
// byte that ends allows, and holds only bytes that inner allows between.
// Every allowed byte is ASCII, so a byte of a multi-byte character never
// matches, as with the regular expressions these checks replace.
func isLabelShaped(s string, ends, inner func(byte) bool) bool {
	if s == "" || !ends(s[0]) || !ends(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !inner(s[i]) {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool     { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
func isLowerAlnumDash(c byte) bool { return isLowerAlnum(c) || c == '-' }
func isAlnum(c byte) bool          { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }
func isLabelKeyByte(c byte) bool   { return isAlnum(c) || c == '-' || c == '_' || c == '.' }

// regexError is apimachinery's explanation of a failed pattern, spacing
// included.
func regexError(msg, pattern string, examples ...string) string {
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString(" (e.g. ")
	for i, e := range examples {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString("'" + e + "', ")
	}
	b.WriteString("regex used for validation is '" + pattern + "')")
	return b.String()
}

// MaxIdentifierLength is the longest identifier of DevGuard's wire.
const MaxIdentifierLength = 128

// IsIdentifier reports whether s is an identifier of DevGuard's wire (a
// consumer, generation, attempt, instance or profile id, a policy
// revision): 1 to 128 characters of A-Z, a-z, 0-9, '-', '_', '.' and ':'.
func IsIdentifier(s string) bool {
	if len(s) == 0 || len(s) > MaxIdentifierLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// IsDigest reports whether s is a SHA-256 digest as 64 lowercase hex
// digits.
func IsDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
