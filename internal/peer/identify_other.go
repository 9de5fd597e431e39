//go:build !linux

package peer

import (
	"net"

	"github.com/marshal-dev/marshal/internal/identity"
)

// Identifier finds the peer of an accepted connection. Outside Linux
// there are no cgroups: every peer is unknown.
type Identifier struct{}

// NewIdentifier returns an Identifier that knows no peer.
func NewIdentifier(string, Launches, identity.NetNS) *Identifier { return &Identifier{} }

// Close releases nothing.
func (x *Identifier) Close() {}

// Identify says every peer is unknown.
func (x *Identifier) Identify(c net.Conn) (*Peer, Who, error) {
	p := &Peer{Transport: TransportTCP}
	if _, ok := c.(*net.UnixConn); ok {
		p.Transport = TransportUnix
	}
	return p, Who{Unscoped: UnscopedUnknown}, nil
}

// Owner finds no process.
func (x *Identifier) Owner(*Peer) int { return 0 }

// Caller says every caller is unknown: outside Linux nothing tells an
// agent from its user, so none is taken for the user.
func Caller(*net.UnixConn, Launches, identity.NetNS) (*Peer, Who) {
	return &Peer{Transport: TransportUnix}, Who{Unscoped: UnscopedUnknown}
}
