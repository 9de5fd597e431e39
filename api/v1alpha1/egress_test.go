package v1alpha1

import (
	"strings"
	"testing"
)

func TestValidateHostPattern(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		want    string // prefix of the only message; "" when valid
	}{
		{name: "name", pattern: "github.com"},
		{name: "single_label", pattern: "localhost"},
		{name: "wildcard_subdomains", pattern: "*.github.com"},
		{name: "any_name", pattern: "*"},
		{name: "digits_inside", pattern: "0.a1"},
		{name: "longest_label", pattern: strings.Repeat("a", 63) + ".com"},
		{name: "longest_name", pattern: strings.Repeat("a.", 126) + "a"},
		{name: "empty", pattern: "", want: "must not be empty"},
		{name: "uppercase", pattern: "GitHub.com", want: "must be lowercase: write github.com"},
		{name: "trailing_dot", pattern: "github.com.", want: "must not end with a dot: write github.com"},
		{name: "wildcard_inside_label", pattern: "git*.com", want: "a wildcard must be the whole leftmost label"},
		{name: "two_wildcards", pattern: "*.*.example.com", want: "a wildcard must be the whole leftmost label"},
		{name: "ipv4", pattern: "10.0.0.1", want: "is an IP address"},
		{name: "wildcard_ipv4", pattern: "*.10.0.0.1", want: "is an IP address"},
		{name: "ipv6", pattern: "::1", want: "is an IP address"},
		{name: "numeric_tld", pattern: "host.123", want: "must end in a label that starts with a letter"},
		{name: "leading_dash", pattern: "-a.com", want: "must be a lowercase RFC 1123 host name"},
		{name: "empty_label", pattern: "a..b", want: "must be a lowercase RFC 1123 host name"},
		{name: "bare_wildcard_dot", pattern: "*.", want: "must be a lowercase RFC 1123 host name"},
		{name: "label_too_long", pattern: strings.Repeat("a", 64) + ".com", want: "must be a lowercase RFC 1123 host name"},
		{name: "bracketed_ipv6", pattern: "[::1]", want: "must be a lowercase RFC 1123 host name"},
		{name: "not_ascii", pattern: "é.com", want: "must be a lowercase RFC 1123 host name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateHostPattern(tc.pattern)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("ValidateHostPattern(%q) = %q, want valid", tc.pattern, got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("ValidateHostPattern(%q) = %q, want one message starting %q", tc.pattern, got, tc.want)
			}
		})
	}
	if got := ValidateHostPattern(strings.Repeat("a.", 127) + "a"); len(got) != 1 || !strings.Contains(got[0], "no more than 253") {
		t.Errorf("a 255-byte name: %q, want the length refused", got)
	}
}

func TestValidateCIDR(t *testing.T) {
	tests := []struct {
		name, cidr, want string
	}{
		{name: "ipv4", cidr: "10.20.0.0/16"},
		{name: "ipv4_everything", cidr: "0.0.0.0/0"},
		{name: "ipv4_host", cidr: "127.0.0.1/32"},
		{name: "ipv6", cidr: "2001:db8::/32"},
		{name: "ipv6_uppercase", cidr: "2001:DB8::/32"},
		{name: "ipv6_loopback", cidr: "::1/128"},
		{name: "host_bits", cidr: "10.20.1.0/16", want: "has bits set beyond its prefix length: write 10.20.0.0/16"},
		{name: "ipv6_host_bits", cidr: "fe80::1/10", want: "has bits set beyond its prefix length: write fe80::/10"},
		{name: "address_without_length", cidr: "10.0.0.1", want: "must be an address range in CIDR notation"},
		{name: "length_too_long", cidr: "10.0.0.0/33", want: "must be an address range in CIDR notation"},
		{name: "leading_zero", cidr: "010.0.0.0/8", want: "must be an address range in CIDR notation"},
		{name: "zone", cidr: "fe80::%eth0/64", want: "must be an address range in CIDR notation"},
		{name: "word", cidr: "banana", want: "must be an address range in CIDR notation"},
		{name: "ipv4_mapped", cidr: "::ffff:10.0.0.0/104", want: "must write an IPv6 range in hexadecimal"},
		{name: "dotted_ipv6", cidr: "1:2:3:4:5:6:1.2.3.4/128", want: "must write an IPv6 range in hexadecimal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateCIDR(tc.cidr)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("ValidateCIDR(%q) = %q, want valid", tc.cidr, got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("ValidateCIDR(%q) = %q, want one message starting %q", tc.cidr, got, tc.want)
			}
		})
	}
}

func TestValidateEgress(t *testing.T) {
	p := &Profile{
		Metadata: ObjectMeta{Name: "coder"},
		Spec: ProfileSpec{Egress: &EgressSpec{
			Default: "block",
			Rules: []EgressRule{
				{Action: EgressAllow, Hosts: []string{"github.com", "*.github.com"}, Ports: []int32{443, 22}},
				{Hosts: []string{"x.com"}},
				{Action: "permit", CIDRs: []string{"10.0.0.0/8", "10.0.0.1/8"}, Ports: []int32{0, 65535, 65536}},
			},
		}},
	}
	want := []string{
		`spec.egress.default: must be one of "deny", "allow", got "block"`,
		"spec.egress.rules[1].action: required",
		`spec.egress.rules[2].action: must be one of "allow", "deny", got "permit"`,
		"spec.egress.rules[2].cidrs[1]: has bits set beyond its prefix length: write 10.0.0.0/8",
		"spec.egress.rules[2].ports[0]: must be a port from 1 to 65535, got 0",
		"spec.egress.rules[2].ports[2]: must be a port from 1 to 65535, got 65536",
	}
	got := errorStrings(p.Validate())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	h := &Host{Metadata: ObjectMeta{Name: "local"}, Spec: HostSpec{Egress: &HostEgressSpec{Unscoped: "sometimes"}}}
	if got := errorStrings(h.Validate()); len(got) != 1 || got[0] != `spec.egress.unscoped: must be one of "deny", "allow", got "sometimes"` {
		t.Errorf("host Validate() = %q", got)
	}
}

func TestDefaultEgress(t *testing.T) {
	p := &Profile{Metadata: ObjectMeta{Name: "coder"}}
	p.Default()
	if p.Spec.Egress != nil {
		t.Errorf("a profile without egress got %+v: it must stay without a proxy", p.Spec.Egress)
	}
	p.Spec.Egress = &EgressSpec{}
	p.Default()
	if p.Spec.Egress.Default != EgressDeny {
		t.Errorf("egress default = %q, want deny", p.Spec.Egress.Default)
	}
	h := &Host{Metadata: ObjectMeta{Name: "local"}, Spec: HostSpec{Egress: &HostEgressSpec{}}}
	h.Default()
	if h.Spec.Egress.Unscoped != EgressDeny {
		t.Errorf("unscoped = %q, want deny", h.Spec.Egress.Unscoped)
	}
}
