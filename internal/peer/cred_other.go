//go:build !linux

package peer

import (
	"errors"
	"fmt"
	"net"
)

// Credentials returns the credentials of the process at the other end of
// conn. Outside Linux it always fails with errors.ErrUnsupported.
func Credentials(conn *net.UnixConn) (Cred, error) {
	return Cred{}, fmt.Errorf("peer credentials: %w", errors.ErrUnsupported)
}
