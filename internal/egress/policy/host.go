package policy

import (
	"net/netip"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// ParseHost reads the host of a destination as a client asked for it (a
// CONNECT authority, an absolute URI, a SOCKS request): an IP address,
// bracketed or not, returned unmapped as addr with name ""; or a DNS
// name, returned lowercased without a trailing dot as name, addr invalid.
// Names may hold '_', which some hosts use though RFC 1123 does not; a
// zone, an empty label, a label over 63 bytes or a name over 253 bytes is
// ErrBadHost.
func ParseHost(s string) (name string, addr netip.Addr, err error) {
	if b, ok := strings.CutPrefix(s, "["); ok {
		b, ok = strings.CutSuffix(b, "]")
		a, err := netip.ParseAddr(b)
		if !ok || err != nil || !a.Is6() || a.Zone() != "" {
			return "", netip.Addr{}, ErrBadHost
		}
		return "", a.Unmap(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, ErrBadHost
		}
		return "", a.Unmap(), nil
	}
	name = strings.TrimSuffix(s, ".")
	if name == "" || len(name) > v1alpha1.MaxHostLength {
		return "", netip.Addr{}, ErrBadHost
	}
	lower := true
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", netip.Addr{}, ErrBadHost
			}
			label = 0
			continue
		case 'A' <= c && c <= 'Z':
			lower = false
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return "", netip.Addr{}, ErrBadHost
		}
		if label++; label > v1alpha1.MaxNameLength {
			return "", netip.Addr{}, ErrBadHost
		}
	}
	if label == 0 {
		return "", netip.Addr{}, ErrBadHost
	}
	if !lower {
		name = strings.ToLower(name)
	}
	return name, netip.Addr{}, nil
}
