package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		name, in, host, addr string
		bad                  bool
	}{
		{name: "name", in: "github.com", host: "github.com"},
		{name: "uppercase", in: "GitHub.COM", host: "github.com"},
		{name: "trailing_dot", in: "github.com.", host: "github.com"},
		{name: "underscore", in: "_acme.example.org", host: "_acme.example.org"},
		{name: "single_label", in: "localhost", host: "localhost"},
		{name: "ipv4", in: "127.0.0.1", addr: "127.0.0.1"},
		{name: "ipv6_bracketed", in: "[::1]", addr: "::1"},
		{name: "ipv6_bare", in: "2001:db8::1", addr: "2001:db8::1"},
		{name: "ipv4_mapped", in: "[::ffff:10.0.0.1]", addr: "10.0.0.1"},
		{name: "empty", in: "", bad: true},
		{name: "dot", in: ".", bad: true},
		{name: "empty_label", in: "a..b", bad: true},
		{name: "leading_dot", in: ".a", bad: true},
		{name: "space", in: "a b", bad: true},
		{name: "port_left_on", in: "a.com:443", bad: true},
		{name: "zone", in: "fe80::1%eth0", bad: true},
		{name: "bracketed_zone", in: "[fe80::1%eth0]", bad: true},
		{name: "bracketed_ipv4", in: "[127.0.0.1]", bad: true},
		{name: "unclosed_bracket", in: "[::1", bad: true},
		{name: "label_too_long", in: strings.Repeat("a", 64) + ".com", bad: true},
		{name: "name_too_long", in: strings.Repeat("a.", 127) + "a", bad: true},
		{name: "not_ascii", in: "é.com", bad: true},
		{name: "nul", in: "a\x00.com", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host, addr, err := ParseHost(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrBadHost) {
					t.Errorf("ParseHost(%q) = %q, %v, %v; want ErrBadHost", tc.in, host, addr, err)
				}
				return
			}
			var want netip.Addr
			if tc.addr != "" {
				want = netip.MustParseAddr(tc.addr)
			}
			if err != nil || host != tc.host || addr != want {
				t.Errorf("ParseHost(%q) = %q, %v, %v; want %q, %v", tc.in, host, addr, err, tc.host, want)
			}
		})
	}
}
