package v1alpha1

import (
	"net/netip"
	"strconv"
	"strings"
)

// MaxHostLength is the longest host name a rule may name: a DNS name of
// at most 253 bytes.
const MaxHostLength = 253

// Port bounds.
const (
	MinPort = 1
	MaxPort = 65535
)

// ValidateHostPattern reports what keeps s from being a host pattern of an
// egress rule, or nil. A pattern is "*", a lowercase RFC 1123 host name,
// or "*." followed by one. Its last label starts with a letter, as a
// top-level domain does (RFC 1123, 2.1), so a pattern is never an IPv4
// address: an address belongs in cidrs.
func ValidateHostPattern(s string) []string {
	if s == "" {
		return []string{"must not be empty"}
	}
	if s == "*" {
		return nil
	}
	name, _ := strings.CutPrefix(s, "*.")
	if _, err := netip.ParseAddr(name); err == nil {
		return []string{"is an IP address: match addresses with cidrs"}
	}
	var errs []string
	if len(s) > MaxHostLength {
		errs = append(errs, "must be no more than "+strconv.Itoa(MaxHostLength)+" bytes")
	}
	switch {
	case strings.Contains(name, "*"):
		errs = append(errs, `a wildcard must be the whole leftmost label, as in '*.github.com'`)
	case strings.HasSuffix(name, "."):
		errs = append(errs, "must not end with a dot: write "+strings.TrimRight(s, "."))
	case name != strings.ToLower(name) && isHostName(strings.ToLower(name)):
		errs = append(errs, "must be lowercase: write "+strings.ToLower(s))
	case !isHostName(name):
		errs = append(errs, `must be a lowercase RFC 1123 host name, optionally starting with "*." (e.g. 'github.com' or '*.github.com'): `+
			`labels of at most 63 characters of a-z, 0-9 and '-', each starting and ending with a letter or digit, joined by dots`)
	case !isLower(name[strings.LastIndexByte(name, '.')+1]):
		errs = append(errs, "must end in a label that starts with a letter, as a top-level domain does: match addresses with cidrs")
	}
	return errs
}

// isHostName reports whether s is lowercase RFC 1123 labels of at most 63
// bytes joined by dots.
func isHostName(s string) bool {
	for label := range strings.SplitSeq(s, ".") {
		if len(label) > MaxNameLength || !isLabelShaped(label, isLowerAlnum, isLowerAlnumDash) {
			return false
		}
	}
	return true
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// ValidateCIDR reports what keeps s from being an address range of an
// egress rule, or nil: an IPv4 or IPv6 prefix in CIDR notation, with no
// bits set beyond its length, so that what is written is what matches,
// and an IPv6 prefix in hexadecimal only.
func ValidateCIDR(s string) []string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return []string{`must be an address range in CIDR notation (e.g. '10.20.0.0/16' or '2001:db8::/32')`}
	}
	if p.Addr().Is6() && strings.Contains(s, ".") {
		// An address is matched unmapped, so an IPv4-mapped range would
		// match nothing.
		return []string{"must write an IPv6 range in hexadecimal, without a dotted IPv4 part (an IPv4 range is written as IPv4)"}
	}
	if m := p.Masked(); m != p {
		return []string{"has bits set beyond its prefix length: write " + m.String()}
	}
	return nil
}

// egress checks a profile's egress policy.
func (v *validator) egress(p Path, e *EgressSpec) {
	enum(v, p.Child("default"), e.Default, EgressDeny, EgressAllow)
	for i, r := range e.Rules {
		rp := p.Child("rules").Index(i)
		if v.required(rp.Child("action"), string(r.Action)) {
			enum(v, rp.Child("action"), r.Action, EgressAllow, EgressDeny)
		}
		for j, h := range r.Hosts {
			for _, msg := range ValidateHostPattern(h) {
				v.add(rp.Child("hosts").Index(j), "%s", msg)
			}
		}
		for j, c := range r.CIDRs {
			for _, msg := range ValidateCIDR(c) {
				v.add(rp.Child("cidrs").Index(j), "%s", msg)
			}
		}
		for j, port := range r.Ports {
			if port < MinPort || port > MaxPort {
				v.add(rp.Child("ports").Index(j), "must be a port from %d to %d, got %d", MinPort, MaxPort, port)
			}
		}
	}
}
