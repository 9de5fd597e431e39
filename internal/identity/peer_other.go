//go:build !linux

package identity

import (
	"errors"
	"fmt"
	"net"
)

// Peer returns the credentials of the process at the other end of conn.
// Outside Linux it always fails with errors.ErrUnsupported.
func Peer(conn *net.UnixConn) (Cred, error) {
	return Cred{}, fmt.Errorf("peer credentials: %w", errors.ErrUnsupported)
}

// PeerIdentity returns the credentials and identity of the process at the
// other end of conn. Outside Linux it always fails with
// errors.ErrUnsupported.
func PeerIdentity(conn *net.UnixConn) (Cred, Identity, error) {
	return Cred{}, Identity{}, fmt.Errorf("peer identity: %w", errors.ErrUnsupported)
}

// PeerNetNS returns the credentials, identity and network namespace of
// the process at the other end of conn. Outside Linux it always fails
// with errors.ErrUnsupported.
func PeerNetNS(conn *net.UnixConn) (Cred, Identity, NetNS, error) {
	return Cred{}, Identity{}, NetNS{}, fmt.Errorf("peer identity: %w", errors.ErrUnsupported)
}

// PeerGroup returns the credentials, cgroup2 group id and network
// namespace of the process at the other end of conn. Outside Linux it
// always fails with errors.ErrUnsupported.
func PeerGroup(conn *net.UnixConn) (Cred, uint64, NetNS, error) {
	return Cred{}, 0, NetNS{}, fmt.Errorf("peer group: %w", errors.ErrUnsupported)
}
