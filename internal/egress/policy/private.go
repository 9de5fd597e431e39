package policy

import "net/netip"

// privateRanges are the ranges Private reports, after an IPv4-mapped
// address is unmapped.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network": Linux connects 0.0.0.0 to this host
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),  // CGNAT, RFC 6598
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata (169.254.169.254)
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("::/128"),         // unspecified: this host, as 0.0.0.0
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fe80::/10"),      // link-local
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits are
// an IPv4 address the translator connects to.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Private reports whether a is an address egress must not reach unless a
// rule names it: loopback (127.0.0.0/8, ::1), RFC 1918 (10.0.0.0/8,
// 172.16.0.0/12, 192.168.0.0/16), link-local (169.254.0.0/16, which holds
// cloud metadata, and fe80::/10), CGNAT (100.64.0.0/10), IPv6 unique-local
// (fc00::/7), and what reaches them: the unspecified addresses (0.0.0.0/8,
// ::), which Linux connects to this host, the IPv4-mapped form of any of
// them and a NAT64 address (64:ff9b::/96) of a private IPv4 address. An
// invalid address is private: nothing may be dialed at it.
func Private(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range privateRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
