package policy

import (
	"net/netip"
	"testing"
)

func TestPrivate(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		private bool
	}{
		{"loopback", "127.0.0.1", true},
		{"loopback_range_end", "127.255.255.255", true},
		{"rfc1918_10", "10.20.30.40", true},
		{"rfc1918_172_first", "172.16.0.0", true},
		{"rfc1918_172_last", "172.31.255.255", true},
		{"rfc1918_192_168", "192.168.1.1", true},
		{"link_local", "169.254.0.1", true},
		{"cloud_metadata", "169.254.169.254", true},
		{"cgnat_first", "100.64.0.0", true},
		{"cgnat_last", "100.127.255.255", true},
		{"this_network", "0.0.0.0", true},
		{"this_network_range", "0.1.2.3", true},
		{"ipv6_loopback", "::1", true},
		{"ipv6_unspecified", "::", true},
		{"ipv6_unique_local_fc", "fc00::1", true},
		{"ipv6_unique_local_fd", "fd12:3456::1", true},
		{"ipv6_link_local", "fe80::1", true},
		{"ipv6_link_local_zone", "fe80::1%eth0", true},
		{"ipv4_mapped_loopback", "::ffff:127.0.0.1", true},
		{"ipv4_mapped_metadata", "::ffff:169.254.169.254", true},
		{"nat64_private", "64:ff9b::a00:1", true},
		{"nat64_metadata", "64:ff9b::a9fe:a9fe", true},

		{"public_v4", "140.82.112.3", false},
		{"below_172_16", "172.15.255.255", false},
		{"above_172_31", "172.32.0.0", false},
		{"below_cgnat", "100.63.255.255", false},
		{"above_cgnat", "100.128.0.0", false},
		{"above_link_local", "169.255.0.0", false},
		{"one_network", "1.0.0.0", false},
		{"public_v6", "2606:4700::1111", false},
		{"below_unique_local", "fbff:ffff::1", false},
		{"above_link_local_v6", "fec0::1", false},
		{"ipv4_mapped_public", "::ffff:140.82.112.3", false},
		{"nat64_public", "64:ff9b::8c52:7003", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			if got := Private(a); got != tc.private {
				t.Errorf("Private(%s) = %v, want %v", tc.addr, got, tc.private)
			}
		})
	}
	if !Private(netip.Addr{}) {
		t.Error("Private(invalid address) = false, want true: nothing may be dialed at it")
	}
}
