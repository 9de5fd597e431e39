package policy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// issueSpec is the example policy of the egress documentation.
var issueSpec = &v1alpha1.EgressSpec{
	Default: v1alpha1.EgressDeny,
	Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, Hosts: []string{"github.com", "*.github.com"}, Ports: []int32{443, 22}},
		{Action: v1alpha1.EgressAllow, Hosts: []string{"registry.npmjs.org"}},
		{Action: v1alpha1.EgressAllow, CIDRs: []string{"10.20.0.0/16"}, Ports: []int32{5432}},
		{Action: v1alpha1.EgressDeny, Hosts: []string{"*.example.net"}},
		{Action: v1alpha1.EgressAllow, Hosts: []string{"*.example.net", "*"}, Ports: []int32{80}},
		{Action: v1alpha1.EgressAllow, Hosts: []string{"localhost", "metadata.internal"}, Ports: []int32{8080, 80}},
		{Action: v1alpha1.EgressAllow, CIDRs: []string{"169.254.169.254/32"}, Ports: []int32{8000}},
	},
}

func mustCompile(t testing.TB, spec *v1alpha1.EgressSpec) *Policy {
	t.Helper()
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const public = "140.82.112.3"

func TestDecide(t *testing.T) {
	p := mustCompile(t, issueSpec)
	tests := []struct {
		name   string
		host   string // "" for an IP address
		addr   string
		port   uint16
		allow  bool
		rule   int
		reason Reason
	}{
		{"exact_host_and_port", "github.com", public, 443, true, 0, ReasonRule},
		{"wildcard_subdomain", "api.github.com", public, 22, true, 0, ReasonRule},
		{"wildcard_deep_subdomain", "a.b.github.com", public, 443, true, 0, ReasonRule},
		{"wildcard_not_the_apex_alone", "evilgithub.com", public, 443, false, -1, ReasonDefault},
		{"port_not_listed", "github.com", public, 80, true, 4, ReasonRule},
		{"port_not_listed_elsewhere", "github.com", public, 8443, false, -1, ReasonDefault},
		{"any_port", "registry.npmjs.org", public, 8443, true, 1, ReasonRule},
		{"cidr_private_named", "db.corp", "10.20.3.4", 5432, true, 2, ReasonRule},
		{"cidr_ip_literal", "", "10.20.3.4", 5432, true, 2, ReasonRule},
		{"cidr_wrong_port", "", "10.20.3.4", 5433, false, -1, ReasonPrivate},
		{"deny_rule_first", "www.example.net", public, 80, false, 3, ReasonRule},
		{"any_name_on_80", "anything.org", public, 80, true, 4, ReasonRule},
		{"host_rules_never_match_ip_literals", "", public, 80, false, -1, ReasonDefault},
		{"wildcard_does_not_reach_private", "anything.org", "192.168.1.1", 80, false, -1, ReasonPrivate},
		{"localhost_named", "localhost", "127.0.0.1", 80, true, 5, ReasonRule},
		{"localhost_ipv6_named", "localhost", "::1", 8080, true, 5, ReasonRule},
		{"localhost_other_port", "localhost", "127.0.0.1", 9000, false, -1, ReasonPrivate},
		{"loopback_literal", "", "127.0.0.1", 80, false, -1, ReasonPrivate},
		{"metadata_literal", "", "169.254.169.254", 80, false, -1, ReasonPrivate},
		{"metadata_named_by_cidr", "", "169.254.169.254", 8000, true, 6, ReasonRule},
		{"name_resolving_private", "evil.example", "10.0.0.1", 80, false, -1, ReasonPrivate},
		{"name_resolving_metadata_named", "metadata.internal", "169.254.169.254", 80, true, 5, ReasonRule},
		{"deny_rule_matches_private", "www.example.net", "10.0.0.1", 80, false, 3, ReasonRule},
		{"ipv4_mapped_is_unmapped", "", "::ffff:10.20.3.4", 5432, true, 2, ReasonRule},
		{"mapped_loopback_still_private", "", "::ffff:127.0.0.1", 80, false, -1, ReasonPrivate},
		{"sixtofour_of_private_through_wildcard", "anything.org", "2002:a00:1::1", 80, false, -1, ReasonPrivate},
		{"teredo_of_loopback_through_wildcard", "anything.org", "2001:0:4136:e378:8000:63bf:80ff:fffe", 80, false, -1, ReasonPrivate},
		{"azure_metadata_through_wildcard", "anything.org", "168.63.129.16", 80, false, -1, ReasonPrivate},
		{"sixtofour_of_public_through_wildcard", "anything.org", "2002:8c52:7003::1", 80, true, 4, ReasonRule},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Decide(tc.host, netip.MustParseAddr(tc.addr), tc.port)
			want := Decision{Allow: tc.allow, Rule: tc.rule, Reason: tc.reason}
			if got != want {
				t.Errorf("Decide(%q, %s, %d) = %+v, want %+v", tc.host, tc.addr, tc.port, got, want)
			}
		})
	}
}

func TestDecideDefaults(t *testing.T) {
	pub, priv := netip.MustParseAddr(public), netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name string
		p    *Policy
		addr netip.Addr
		want Decision
	}{
		{"allow_all_public", AllowAll, pub, Decision{Allow: true, Rule: -1, Reason: ReasonDefault}},
		{"allow_all_private", AllowAll, priv, Decision{Rule: -1, Reason: ReasonPrivate}},
		{"deny_all_public", DenyAll, pub, Decision{Rule: -1, Reason: ReasonDefault}},
		{"default_allow", mustCompile(t, &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow}), pub,
			Decision{Allow: true, Rule: -1, Reason: ReasonDefault}},
		{"allow_everything_rule_is_not_a_name", mustCompile(t, &v1alpha1.EgressSpec{
			Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressAllow}}}), priv,
			Decision{Rule: -1, Reason: ReasonPrivate}},
		{"deny_everything_on_a_port", mustCompile(t, &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow,
			Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressDeny, Ports: []int32{25}}}}), pub,
			Decision{Rule: 0, Reason: ReasonRule}},
		{"wildcard_and_cidr_in_one_rule", mustCompile(t, &v1alpha1.EgressSpec{
			Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressAllow, Hosts: []string{"*.corp"}, CIDRs: []string{"10.0.0.0/8"}}}}), priv,
			Decision{Allow: true, Rule: 0, Reason: ReasonRule}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Decide("db.corp", tc.addr, 25); got != tc.want {
				t.Errorf("Decide(db.corp, %s, 25) = %+v, want %+v", tc.addr, got, tc.want)
			}
		})
	}
}

func TestPrejudge(t *testing.T) {
	p := mustCompile(t, issueSpec)
	tests := []struct {
		name  string
		host  string
		port  uint16
		final bool
		rule  int
	}{
		{"no_rule_can_match", "evil.example", 443, true, -1},
		{"a_cidr_rule_on_the_port", "evil.example", 5432, false, 0},
		{"deny_rule_by_name", "www.example.net", 443, true, 3},
		{"allow_rule_by_name", "github.com", 443, false, 0},
		{"wildcard_allow_depends_on_the_address", "anything.org", 80, false, 0},
		{"ip_literal", "", 443, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, final := p.Prejudge(tc.host, tc.port)
			if final != tc.final || final && (d.Allow || d.Rule != tc.rule) {
				t.Errorf("Prejudge(%q, %d) = %+v, %v; want final %v, rule %d", tc.host, tc.port, d, final, tc.final, tc.rule)
			}
		})
	}
	if _, final := AllowAll.Prejudge("anything.org", 443); final {
		t.Error("AllowAll prejudged a name as denied")
	}
}

func TestCompileRefusesInvalid(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.EgressSpec
		want string
	}{
		{"default", v1alpha1.EgressSpec{Default: "maybe"}, "default"},
		{"action", v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{{Action: "permit"}}}, "rules[0]: action"},
		{"host", v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{{Action: "allow", Hosts: []string{"a", "10.0.0.1"}}}}, "rules[0]: hosts[1]"},
		{"cidr", v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{{Action: "deny", CIDRs: []string{"10.0.0.1"}}}}, "rules[0]: cidrs[0]"},
		{"port", v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{{Action: "deny"}, {Action: "deny", Ports: []int32{70000}}}}, "rules[1]: ports[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Compile(&tc.spec); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Compile(%+v) = %v, want an error starting %q", tc.spec, err, tc.want)
			}
		})
	}
	if p, err := Compile(nil); err != nil || p != DenyAll {
		t.Errorf("Compile(nil) = %v, %v; want DenyAll", p, err)
	}
}

// hostAddrs is a host's own addresses, as a table.
type hostAddrs map[netip.Addr]bool

func (h hostAddrs) Has(a netip.Addr) bool { return h[a] }

func TestDecideHostAddresses(t *testing.T) {
	own := hostAddrs{netip.MustParseAddr("198.51.100.7"): true, netip.MustParseAddr("2001:db8::7"): true,
		netip.MustParseAddr("10.1.2.3"): true}
	p := mustCompile(t, &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow, Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, Hosts: []string{"*.wild.test"}},
		{Action: v1alpha1.EgressAllow, Hosts: []string{"self.test"}},
		{Action: v1alpha1.EgressAllow, CIDRs: []string{"198.51.100.0/24"}, Ports: []int32{8443}},
	}})
	tests := []struct {
		name string
		host string
		addr string
		port uint16
		want Decision
	}{
		{"default_allow_does_not_reach_it", "", "198.51.100.7", 80, Decision{Rule: -1, Reason: ReasonHostAddress}},
		{"ipv6", "", "2001:db8::7", 80, Decision{Rule: -1, Reason: ReasonHostAddress}},
		{"mapped", "", "::ffff:198.51.100.7", 80, Decision{Rule: -1, Reason: ReasonHostAddress}},
		{"nat64_of_it", "", "64:ff9b::c633:6407", 80, Decision{Rule: -1, Reason: ReasonHostAddress}},
		{"sixtofour_of_it", "", "2002:c633:6407::1", 80, Decision{Rule: -1, Reason: ReasonHostAddress}},
		{"wildcard_does_not_reach_it", "a.wild.test", "198.51.100.7", 80, Decision{Rule: -1, Reason: ReasonHostAddress}},
		{"named_host_reaches_it", "self.test", "198.51.100.7", 80, Decision{Allow: true, Rule: 1, Reason: ReasonRule}},
		{"cidr_reaches_it", "", "198.51.100.7", 8443, Decision{Allow: true, Rule: 2, Reason: ReasonRule}},
		{"private_says_private", "", "10.1.2.3", 80, Decision{Rule: -1, Reason: ReasonPrivate}},
		{"a_neighbour_is_not_it", "", "198.51.100.8", 80, Decision{Allow: true, Rule: -1, Reason: ReasonDefault}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.DecideWith(tc.host, netip.MustParseAddr(tc.addr), tc.port, own); got != tc.want {
				t.Errorf("DecideWith(%q, %s, %d) = %+v, want %+v", tc.host, tc.addr, tc.port, got, tc.want)
			}
		})
	}
	if got := p.Decide("", netip.MustParseAddr("198.51.100.7"), 80); !got.Allow {
		t.Errorf("Decide without host addresses = %+v, want the default", got)
	}
}
