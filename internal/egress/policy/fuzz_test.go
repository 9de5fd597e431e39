package policy

import (
	"net/netip"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// FuzzCompile compiles a one-rule policy from fuzzed parts and checks
// what must hold of any policy: it compiles exactly when the API accepts
// it, Decide never lets a private address through a rule that does not
// name it, a host rule never matches an IP address, a name Prejudge
// denies is denied at every address, and an exact host rule matches its
// own name.
func FuzzCompile(f *testing.F) {
	f.Add("allow", "github.com", "10.20.0.0/16", int32(443), "GitHub.com.", []byte{140, 82, 112, 3}, uint16(443), true)
	f.Add("allow", "*.github.com", "", int32(22), "api.github.com", []byte{10, 0, 0, 1}, uint16(22), false)
	f.Add("deny", "*", "169.254.169.254/32", int32(80), "169.254.169.254", []byte{169, 254, 169, 254}, uint16(80), true)
	f.Add("allow", "localhost", "::1/128", int32(0), "localhost", []byte{127, 0, 0, 1}, uint16(8080), false)
	f.Add("permit", "10.0.0.1", "10.0.0.1/8", int32(70000), "[::1]", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint16(1), true)
	f.Fuzz(func(t *testing.T, action, host, cidr string, port int32, dest string, addrBytes []byte, destPort uint16, deflt bool) {
		rule := v1alpha1.EgressRule{Action: v1alpha1.EgressAction(action)}
		if host != "" {
			rule.Hosts = []string{host}
		}
		if cidr != "" {
			rule.CIDRs = []string{cidr}
		}
		if port != 0 {
			rule.Ports = []int32{port}
		}
		spec := &v1alpha1.EgressSpec{Default: v1alpha1.EgressDeny, Rules: []v1alpha1.EgressRule{rule}}
		if deflt {
			spec.Default = v1alpha1.EgressAllow
		}
		prof := &v1alpha1.Profile{Metadata: v1alpha1.ObjectMeta{Name: "p"}, Spec: v1alpha1.ProfileSpec{Egress: spec}}
		valid := len(prof.Validate()) == 0
		p, err := Compile(spec)
		if valid != (err == nil) {
			t.Fatalf("Validate says valid=%v, Compile says %v", valid, err)
		}
		if err != nil {
			return
		}

		name, literal, herr := ParseHost(dest)
		if herr != nil {
			return
		}
		addr, ok := netip.AddrFromSlice(addrBytes)
		if literal.IsValid() {
			addr, ok = literal, true
		}
		if !ok {
			return
		}
		d := p.Decide(name, addr, destPort)
		if d.Reason == ReasonRule && (d.Rule != 0 || d.Allow != (rule.Action == v1alpha1.EgressAllow)) {
			t.Fatalf("Decide = %+v for a one-rule policy of action %q", d, rule.Action)
		}
		if d.Allow && Private(addr) {
			exact := name != "" && name == host
			inCIDR := cidr != "" && netip.MustParsePrefix(cidr).Contains(addr.Unmap())
			if d.Reason != ReasonRule || !exact && !inCIDR {
				t.Fatalf("private %s allowed (%+v) without a rule naming %q or its address", addr, d, name)
			}
		}
		if name == "" && cidr == "" && host != "" && d.Reason == ReasonRule {
			t.Fatalf("host rule %q matched the IP address %s", host, addr)
		}
		if pd, final := p.Prejudge(name, destPort); final {
			if pd.Allow || d.Allow {
				t.Fatalf("Prejudge(%q, %d) = %+v final, but Decide at %s = %+v", name, destPort, pd, addr, d)
			}
		}
		if host != "" && host[0] != '*' && rule.Action == v1alpha1.EgressAllow && (port == 0 || uint16(port) == destPort) {
			if got := p.Decide(host, netip.MustParseAddr("140.82.112.3"), destPort); !got.Allow {
				t.Fatalf("rule allowing %q does not allow it: %+v", host, got)
			}
		}
	})
}
