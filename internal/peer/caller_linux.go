package peer

import (
	"errors"
	"net"

	"github.com/marshal-dev/marshal/internal/identity"
)

// Caller identifies the process at the other end of c for a control
// request: its credentials, its network namespace and its cgroup, read
// from /proc/<pid>/cgroup while a pidfd holds it, so that a peer in no
// marshal scope is told apart from one whose group cannot be found. host
// is marshald's own network namespace.
//
// A peer that is no launch's, but whose network namespace is not host,
// is Unscoped UnscopedOtherNetNS, with Home the launch whose namespace
// it is in when one is: a process of a netns agent that left its scope
// is still known by the namespace it cannot leave. A peer whose cgroup
// could not be read is UnscopedUnknown; only UnscopedNone says the peer
// is in no scope and in the host's namespace.
func Caller(c *net.UnixConn, launches Launches, host identity.NetNS) (*Peer, Who) {
	p := &Peer{Transport: TransportUnix}
	cred, id, ns, err := namespaceOf(c)
	p.NetNS = ns
	p.PID, p.UID, p.GID, p.HasUID = cred.PID, cred.UID, cred.GID, err == nil || cred.UID != 0 || cred.PID != 0
	var who Who
	switch {
	case err == nil && id.Hierarchy == identity.Unified:
		p.Cgroup = id.Path
		who = Attribute(p, launches)
	case err == nil:
		// A scope found in systemd's v1 hierarchy only: launches record
		// cgroup2 paths, so it is nobody's that can be confirmed.
		who = Who{Unscoped: UnscopedNotLaunched, Claimed: id.Identity, Why: "its scope is in " + string(id.Hierarchy) + " only"}
	case errors.Is(err, identity.ErrNotManaged):
		who = Who{Unscoped: UnscopedNone}
	default:
		return p, Who{Unscoped: UnscopedUnknown}
	}
	if who.Unscoped == UnscopedNone && !host.IsZero() && ns != host {
		who = Who{Unscoped: UnscopedOtherNetNS, Why: "the peer is in network namespace " + ns.String() + ", not marshald's", Home: homeOf(ns, launches)}
	}
	return p, who
}
