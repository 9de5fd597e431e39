package policy

import "net/netip"

// privateRanges are the ranges Private reports, after an IPv4 address
// embedded in an IPv6 one is taken out.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network": Linux connects 0.0.0.0 to this host
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),  // CGNAT, RFC 6598; holds Alibaba's metadata (100.100.100.200)
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata (169.254.169.254)
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("::/128"),         // unspecified: this host, as 0.0.0.0
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("fc00::/7"),       // unique local; holds AWS's metadata (fd00:ec2::254)
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215): where it leads is the site's choice
}

// metadataAddresses are cloud metadata services outside the ranges
// above, where a request carries the instance's credentials.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("168.63.129.16"),   // Azure's wire server
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud's metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud's metadata (in CGNAT too)
	netip.MustParseAddr("fd00:ec2::254"),   // AWS's metadata over IPv6 (in fc00::/7 too)
}

// The IPv6 prefixes whose addresses carry an IPv4 address that a
// translator or tunnel then reaches.
var (
	// compatible is the deprecated IPv4-compatible form ::a.b.c.d
	// (RFC 4291 2.5.5.1), which some stacks still route to IPv4.
	compatible = netip.MustParsePrefix("::/96")
	// translated is SIIT's IPv4-translated form ::ffff:0:a.b.c.d
	// (RFC 2765).
	translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits
	// are the IPv4 address the translator connects to.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// sixToFour is 6to4 (RFC 3056): 2002:AABB:CCDD::/48 is the site
	// behind the IPv4 address AA.BB.CC.DD.
	sixToFour = netip.MustParsePrefix("2002::/16")
	// teredo is Teredo (RFC 4380): 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC
	// holds the server's IPv4 address and the client's, the latter with
	// every bit inverted.
	teredo = netip.MustParsePrefix("2001::/32")
)

// Private reports whether a is an address egress must not reach unless a
// rule names it: loopback (127.0.0.0/8, ::1), RFC 1918 (10.0.0.0/8,
// 172.16.0.0/12, 192.168.0.0/16), link-local (169.254.0.0/16, which holds
// cloud metadata, and fe80::/10), CGNAT (100.64.0.0/10), IPv6 unique-local
// (fc00::/7), the cloud metadata addresses outside them (168.63.129.16,
// 192.0.0.192), the local-use NAT64 prefix (64:ff9b:1::/48), and what
// reaches them: the unspecified addresses (0.0.0.0/8, ::), which Linux
// connects to this host, and every IPv6 form that carries a private IPv4
// address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d,
// IPv4-translated ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16,
// and Teredo 2001::/32, whose server and client are both decided). An
// invalid address is private: nothing may be dialed at it.
func Private(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
	if private(a) {
		return true
	}
	carried, n := carriedIPv4(a)
	for _, c := range carried[:n] {
		if private(c) {
			return true
		}
	}
	return false
}

// carriedIPv4 returns the IPv4 addresses an IPv6 address a carries for
// a translator or tunnel to reach: one for the IPv4-compatible,
// IPv4-translated, NAT64 and 6to4 forms, two for Teredo (server and
// client), none otherwise. a is unmapped.
func carriedIPv4(a netip.Addr) (carried [2]netip.Addr, n int) {
	if !a.Is6() {
		return carried, 0
	}
	b := a.As16()
	switch {
	case compatible.Contains(a), translated.Contains(a), nat64.Contains(a):
		carried[0] = netip.AddrFrom4([4]byte(b[12:16]))
		return carried, 1
	case sixToFour.Contains(a):
		carried[0] = netip.AddrFrom4([4]byte(b[2:6]))
		return carried, 1
	case teredo.Contains(a):
		carried[0] = netip.AddrFrom4([4]byte(b[4:8]))
		carried[1] = netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return carried, 2
	}
	return carried, 0
}

// HostAddresses are this host's own addresses (hostaddr.Set is one):
// every address on its interfaces, which reach the services it listens
// on as loopback does.
type HostAddresses interface {
	// Has reports whether a is one of them.
	Has(a netip.Addr) bool
}

// hostAddress reports whether a, or an IPv4 address it carries, is one of
// own's.
func hostAddress(own HostAddresses, a netip.Addr) bool {
	if own == nil {
		return false
	}
	a = a.Unmap().WithZone("")
	if own.Has(a) {
		return true
	}
	carried, n := carriedIPv4(a)
	for _, c := range carried[:n] {
		if own.Has(c) {
			return true
		}
	}
	return false
}

// private reports whether a itself, unmapped, is in a private range or
// is a metadata address.
func private(a netip.Addr) bool {
	for _, p := range privateRanges {
		if p.Contains(a) {
			return true
		}
	}
	for _, m := range metadataAddresses {
		if a == m {
			return true
		}
	}
	return false
}
