//go:build !linux

package apiserver

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// peerGroups returns the supplementary groups of the peer of conn.
// Outside Linux it always fails with errors.ErrUnsupported.
func peerGroups(conn *net.UnixConn) ([]uint32, error) {
	return nil, fmt.Errorf("peer groups: %w", errors.ErrUnsupported)
}

// lockFile opens path. Outside Linux it takes no lock: Listen relies on
// its probe of the socket alone.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("socket lock: %w", err)
	}
	return f, nil
}

// unlockFile removes the lock file at path and closes f.
func unlockFile(f *os.File, path string) {
	os.Remove(path)
	f.Close()
}
