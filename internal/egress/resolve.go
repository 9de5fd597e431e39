package egress

import (
	"hash/fnv"
	"net/netip"

	"github.com/marshal-dev/marshal/internal/peer"
)

// PlaceholderPrefix is where the placeholder addresses of allowed names
// lie: loopback, so that inside a netns agent's namespace each reaches
// the bridge with no configuration, and outside it nothing.
var PlaceholderPrefix = netip.MustParsePrefix("127.77.0.0/16")

// Placeholder is the address a resolve request for name (normalized, as
// policy.ParseHost returns it) is answered with: a hash of the name into
// PlaceholderPrefix, so that the proxy keeps no table and the answer is
// the same after a restart. Two names may share one; the bridge, which
// listens on them, gives the later name another.
func Placeholder(name string) netip.Addr {
	h := fnv.New32a()
	h.Write([]byte(name))
	n := h.Sum32()%(1<<16-2) + 1 // neither .0.0 nor .255.255
	b := PlaceholderPrefix.Addr().As4()
	b[2], b[3] = byte(n>>8), byte(n)
	return netip.AddrFrom4(b)
}

// decideName decides a resolve request of a peer who is who: by the
// name alone, allowed when some rule could allow it on some port. The
// name is never looked up.
func (p *Proxy) decideName(who peer.Who, t target) verdict {
	pol, reason := p.policies.forPeer(who)
	if pol == nil {
		return verdict{verdict: VerdictDeny, reason: reason}
	}
	return decided(pol.DecideName(t.name), netip.AddrPort{})
}
