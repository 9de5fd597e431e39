package peer

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/scope"
)

// Launch is what marshald recorded of one launch.
type Launch struct {
	// ID is the scope's 32 hex digits.
	ID        string
	Profile   string
	Workspace string
	// Attempt is the admission attempt, "" when the launch runs
	// unaccounted.
	Attempt string
	// Path is the scope's cgroup2 path relative to the cgroup2 mount,
	// "" while the scope is being made.
	Path string
	// NetNS is the network namespace the launch was given, the only one
	// its connections count from: the host's, or the launch's own under
	// netns isolation. Zero while that is not known (its namespace is not
	// made yet), which no peer is in.
	NetNS identity.NetNS
}

// Launches is marshald's record of the launches it made and whose scopes
// live.
type Launches interface {
	// Launch returns the launch whose scope has ID id, and false when
	// marshald did not make it or it is over.
	Launch(id string) (Launch, bool)
	// Launches returns every launch whose scope exists.
	Launches() []Launch
}

// Transports a peer reaches the proxy over.
const (
	TransportTCP  = "tcp"
	TransportUnix = "unix"
)

// Peer is what the kernel says of the process at the other end of an
// accepted connection.
type Peer struct {
	Transport string
	// Cgroup is the peer's cgroup2 path ("" when unknown): the group its
	// socket was made in (TCP), or the process's own (unix).
	Cgroup string
	// CgroupID is the TCP socket's group, or the unix peer's where the
	// kernel names it; sockInode the socket's inode, which names it in
	// /proc/<pid>/fd; local and remote its addresses.
	CgroupID      uint64
	sockInode     uint32
	local, remote netip.AddrPort
	// NetNS is the peer's network namespace: the process's (unix), or
	// the listener's (TCP: loopback connects only within a namespace).
	NetNS identity.NetNS
	// PID, UID and GID are the peer process's, when the transport names
	// it (SO_PEERCRED); a TCP peer's pid is found later, for the audit.
	PID int
	UID uint32
	GID uint32
	// HasUID reports whether UID is known.
	HasUID bool
}

// Why a peer counts as no launch's. Enumerations, as the audit log
// writes them.
const (
	// UnscopedNone: the peer is in no marshal scope.
	UnscopedNone = "no_scope"
	// UnscopedNotLaunched: the peer's group is named like a marshal
	// scope, but marshald launched no such scope: no launch of that ID,
	// one of another profile, or one whose scope is elsewhere.
	UnscopedNotLaunched = "scope_not_launched"
	// UnscopedUnknown: the kernel could not say where the peer is (it
	// closed its socket at once, or its group is gone).
	UnscopedUnknown = "unknown_peer"
	// UnscopedOtherNetNS: the peer's group is a launch's scope, but the
	// peer is in another network namespace than the one that launch was
	// given: a process of a netns agent that moved itself into another
	// launch's scope, or a process of the host's namespace in a netns
	// launch's. Its identity is not borrowed.
	UnscopedOtherNetNS = "other_netns"
)

// Who is who a peer is: a launch, or nobody and why.
type Who struct {
	Launch
	// Scope is the launch's scope unit name, "" when unscoped.
	Scope string
	// Unscoped says why the peer is no launch's; "" when it is one's.
	Unscoped string
	// Claimed is the scope a peer's group is named like, and Why the
	// launch of its ID is not the peer's, when Unscoped is
	// UnscopedNotLaunched or UnscopedOtherNetNS.
	Claimed scope.Identity
	Why     string
	// Home is the scope of the launch whose network namespace the peer is
	// in, when Unscoped is UnscopedOtherNetNS and one is.
	Home string
}

// Scoped reports whether the peer is a launch's.
func (a Who) Scoped() bool { return a.Unscoped == "" }

// Key names the peer for the bound on connections per peer: its launch,
// else its group, else its user.
func (a Who) Key(p *Peer) string {
	switch {
	case a.Scoped():
		return "launch:" + a.ID
	case p.CgroupID != 0:
		return "cgroup:" + strconv.FormatUint(p.CgroupID, 10)
	case p.Cgroup != "":
		return "cgroup:" + p.Cgroup
	case p.HasUID:
		return "uid:" + strconv.FormatUint(uint64(p.UID), 10)
	}
	return "unknown"
}

// check confirms that a peer found in the scope named by id belongs to
// launch l, which marshald recorded under id.ID: it returns nil, or why
// not. Each check is one claim of the launch record the peer must meet.
type check func(p *Peer, id scope.Identity, l Launch) error

// checks are what a peer in a scope must meet to count as its launch's.
var checks = []check{
	// The scope's name says its profile; the launch of that ID must be
	// of the same profile, so that a scope named for a permissive
	// profile gains nothing.
	func(_ *Peer, id scope.Identity, l Launch) error {
		if l.Profile != id.Profile {
			return fmt.Errorf("scope %s names profile %q; its launch is of %q", id.Scope, id.Profile, l.Profile)
		}
		return nil
	},
	// The scope must be the one marshald made for the launch, not a
	// group of the same name elsewhere.
	func(_ *Peer, id scope.Identity, l Launch) error {
		if l.Path != id.Path {
			return fmt.Errorf("scope %s is at %s; its launch's is at %s", id.Scope, id.Path, l.Path)
		}
		return nil
	},
	// The peer must be in the network namespace the launch was given. A
	// process can write itself into another scope wherever the tree is
	// delegated to its user, but a netns agent cannot leave its
	// namespace: it borrows no identity, and nothing in any agent's
	// namespace counts as a launch in the host's.
	func(p *Peer, id scope.Identity, l Launch) error {
		switch {
		case l.NetNS.IsZero():
			return &netnsError{fmt.Sprintf("scope %s's launch has made no network namespace yet", id.Scope)}
		case p.NetNS != l.NetNS:
			return &netnsError{fmt.Sprintf("the peer is in network namespace %s; scope %s's launch is in %s", p.NetNS, id.Scope, l.NetNS)}
		}
		return nil
	},
}

// netnsError is a peer in another network namespace than its scope's
// launch.
type netnsError struct{ why string }

func (e *netnsError) Error() string { return e.why }

// Attribute resolves a peer whose cgroup2 path is known to its launch:
// the scope parser names the scope, and it counts only when marshald
// launched it and the peer meets every check.
func Attribute(p *Peer, launches Launches) Who {
	if p.Cgroup == "" {
		return Who{Unscoped: UnscopedUnknown}
	}
	id, ok := scope.Parse(p.Cgroup)
	if !ok {
		return Who{Unscoped: UnscopedNone}
	}
	l, ok := launches.Launch(id.ID)
	if !ok {
		return Who{Unscoped: UnscopedNotLaunched, Claimed: id, Why: "marshald recorded no launch " + id.ID}
	}
	for _, c := range checks {
		err := c(p, id, l)
		var ne *netnsError
		switch {
		case errors.As(err, &ne):
			return Who{Unscoped: UnscopedOtherNetNS, Claimed: id, Why: ne.why, Home: homeOf(p.NetNS, launches)}
		case err != nil:
			return Who{Unscoped: UnscopedNotLaunched, Claimed: id, Why: err.Error()}
		}
	}
	return Who{Launch: l, Scope: id.Scope}
}

// homeOf returns the scope of the launch under netns isolation whose
// namespace is ns, "" when none is.
func homeOf(ns identity.NetNS, launches Launches) string {
	if ns.IsZero() {
		return ""
	}
	for _, l := range launches.Launches() {
		if l.NetNS == ns && l.Path != "" {
			if id, ok := scope.Parse(l.Path); ok {
				return id.Scope
			}
		}
	}
	return ""
}
