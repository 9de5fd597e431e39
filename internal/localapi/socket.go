package localapi

import (
	"fmt"
	"os"
	"path/filepath"
)

// Where the socket is. marshald listens, and marshalctl dials, where
// these say, so that neither needs the other to find it.
const (
	// SocketEnv names the environment variable that overrides the
	// default socket.
	SocketEnv = "MARSHAL_SOCKET"
	// SystemSocket is the socket of system mode (marshald as root).
	SystemSocket = "/run/marshal/marshal.sock"
	// UserSocketName is the socket's name in $XDG_RUNTIME_DIR in user
	// mode.
	UserSocketName = "marshal.sock"
)

// DefaultSocket returns the socket of this user's mode: SystemSocket for
// root, else $XDG_RUNTIME_DIR/marshal.sock. It fails with ErrNoRuntimeDir
// when a user has no (absolute) XDG_RUNTIME_DIR.
func DefaultSocket() (string, error) {
	return DefaultSocketFor(os.Geteuid(), os.Getenv)
}

// DefaultSocketFor is DefaultSocket for the user euid with the environment
// getenv reads; marshald uses it to listen where marshalctl looks.
func DefaultSocketFor(euid int, getenv func(string) string) (string, error) {
	if euid == 0 {
		return SystemSocket, nil
	}
	dir := getenv("XDG_RUNTIME_DIR")
	if dir == "" || !filepath.IsAbs(dir) {
		return "", fmt.Errorf("finding marshald's socket: %w (or not absolute); "+
			"log in through a session that sets it, pass --socket, or set %s", ErrNoRuntimeDir, SocketEnv)
	}
	return filepath.Join(dir, UserSocketName), nil
}

// ResolveSocket returns the socket a client uses: flag when set, else
// $MARSHAL_SOCKET when set, else DefaultSocket.
func ResolveSocket(flag string) (string, error) {
	return ResolveSocketFor(flag, os.Geteuid(), os.Getenv)
}

// ResolveSocketFor is ResolveSocket for the user euid with the
// environment getenv reads.
func ResolveSocketFor(flag string, euid int, getenv func(string) string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := getenv(SocketEnv); env != "" {
		return env, nil
	}
	return DefaultSocketFor(euid, getenv)
}
