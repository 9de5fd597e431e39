package egress

import (
	"net/netip"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func TestResolveAnswersAllowedNamesOnly(t *testing.T) {
	h := newHarness(t, nil)
	h.policies.declare("coder", &v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, Hosts: []string{"*.allowed.test"}, Ports: []int32{443}},
	}})
	a := h.launch("coder", "webapp")
	want := Placeholder("api.allowed.test")
	if !PlaceholderPrefix.Contains(want) {
		t.Fatalf("Placeholder = %s, not in %s", want, PlaceholderPrefix)
	}
	for _, network := range []string{"tcp", "unix"} {
		addr := h.tcp
		if network == "unix" {
			addr = h.sock
		}
		// The resolver does not know the name: nothing is looked up.
		out := h.client(a.dir, "resolve", network, addr, "API.allowed.test.")
		if out != "reply 0 "+want.String()+"\n" {
			t.Errorf("resolve over %s = %q, want reply 0 %s", network, out, want)
		}
		rec := h.audit.next(t)
		wantRecord(t, rec, a, ProtocolDNS, "api.allowed.test", VerdictAllow, "rule")
		if rec.Address != want.String() || rec.Port != 0 || rec.Rule == nil || *rec.Rule != 0 || rec.BytesOut != 0 {
			t.Errorf("record address %s port %d rule %v out %d; want %s, 0, 0, 0", rec.Address, rec.Port, rec.Rule, rec.BytesOut, want)
		}

		if out := h.client(a.dir, "resolve", network, addr, "denied.test"); out != "reply 2 0.0.0.0\n" {
			t.Errorf("resolve of a denied name over %s = %q, want reply 2", network, out)
		}
		wantRecord(t, h.audit.next(t), a, ProtocolDNS, "denied.test", VerdictDeny, "default")
	}

	if out := h.client(a.dir, "resolve", "tcp", h.tcp, "127.0.0.1"); out != "reply 4 0.0.0.0\n" {
		t.Errorf("resolve of an address = %q, want reply 4", out)
	}
	rec := h.audit.next(t)
	if rec.Protocol != ProtocolDNS || rec.Verdict != VerdictError || rec.Error != ErrorBadHost {
		t.Errorf("record of an address = %s %s %s, want dns error bad_host", rec.Protocol, rec.Verdict, rec.Error)
	}
}

func TestPlaceholderIsStableAndInItsRange(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for _, name := range []string{"a.test", "b.test", "github.com", "registry.npmjs.org"} {
		a := Placeholder(name)
		if a != Placeholder(name) || !PlaceholderPrefix.Contains(a) || a == PlaceholderPrefix.Addr() {
			t.Errorf("Placeholder(%q) = %s: want a stable address of %s other than its first", name, a, PlaceholderPrefix)
		}
		seen[a] = true
	}
	if len(seen) != 4 {
		t.Errorf("four names got %d placeholders", len(seen))
	}
}
