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
		{"nat64_local_use", "64:ff9b:1::8c52:7003", true},
		{"nat64_local_use_last", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", true},
		{"ipv4_compatible_loopback", "::127.0.0.1", true},
		{"ipv4_compatible_rfc1918", "::10.1.2.3", true},
		{"ipv4_compatible_metadata", "::169.254.169.254", true},
		{"ipv4_translated_rfc1918", "::ffff:0:192.168.0.1", true},
		{"ipv4_translated_metadata", "::ffff:0:169.254.169.254", true},
		{"sixtofour_loopback", "2002:7f00:1::1", true},
		{"sixtofour_rfc1918", "2002:c0a8:101::", true},
		{"sixtofour_metadata", "2002:a9fe:a9fe:1:2:3:4:5", true},
		{"sixtofour_azure_metadata", "2002:a83f:8110::1", true},
		// Teredo: server 65.54.227.120, client 127.0.0.1 inverted.
		{"teredo_client_loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe", true},
		// Teredo: server 65.54.227.120, client 10.0.0.1 inverted.
		{"teredo_client_rfc1918", "2001:0:4136:e378:8000:63bf:f5ff:fffe", true},
		// Teredo: server 10.0.0.1, client 140.82.112.3 inverted.
		{"teredo_server_rfc1918", "2001:0:a00:1:8000:63bf:73ad:8ffc", true},
		{"metadata_azure", "168.63.129.16", true},
		{"metadata_oracle", "192.0.0.192", true},
		{"metadata_alibaba", "100.100.100.200", true},
		{"metadata_aws_v6", "fd00:ec2::254", true},
		{"ipv4_mapped_azure_metadata", "::ffff:168.63.129.16", true},
		{"nat64_oracle_metadata", "64:ff9b::c000:c0", true},

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
		{"ipv4_compatible_public", "::140.82.112.3", false},
		{"ipv4_translated_public", "::ffff:0:140.82.112.3", false},
		{"sixtofour_public", "2002:8c52:7003::1", false},
		// Teredo: server 65.54.227.120, client 140.82.112.3 inverted.
		{"teredo_public", "2001:0:4136:e378:8000:63bf:73ad:8ffc", false},
		{"beside_teredo", "2001:1::1", false},
		{"beside_nat64_local_use", "64:ff9b:2::a00:1", false},
		{"beside_azure_metadata", "168.63.129.17", false},
		{"beside_oracle_metadata", "192.0.0.193", false},
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
