package identity

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Peer returns the credentials the kernel recorded (SO_PEERCRED) for the
// process at the other end of conn: the one that connected, or that made
// the socket pair. They are fixed at that moment; the process may have
// exited since.
func Peer(conn *net.UnixConn) (Cred, error) {
	cred, _, err := peer(conn, false)
	return cred, err
}

// PeerIdentity returns the credentials of the process at the other end of
// conn and its identity, as Resolve gives it. The identity is that of the
// peer itself, never of a later process that reused its pid: where the
// kernel hands out a pidfd for the peer (SO_PEERPIDFD, Linux 6.5), the
// peer is confirmed not yet reaped after its cgroup was read. The error wraps
// ErrNoProcess when the peer has exited or its pid is not visible here,
// and ErrNotManaged when it is not in a marshal scope; Cred is filled
// whenever the credentials could be read, so a caller can still judge an
// unmanaged peer by its uid.
func PeerIdentity(conn *net.UnixConn) (Cred, Identity, error) {
	cred, pidfd, err := peer(conn, true)
	if err != nil {
		return cred, Identity{}, err
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	id, err := resolvePeer(cred, pidfd)
	return cred, id, err
}

// resolvePeer resolves the peer cred names, confirmed by its pidfd (-1
// for none) not to have been reaped meanwhile.
func resolvePeer(cred Cred, pidfd int) (Identity, error) {
	if cred.PID == 0 {
		return Identity{}, fmt.Errorf("peer pid not visible in this pid namespace: %w", ErrNoProcess)
	}
	id, err := Resolve(cred.PID)
	if errors.Is(err, ErrNoProcess) {
		return Identity{}, fmt.Errorf("peer: %w", err)
	}
	// Until the peer is reaped its pid cannot be reused, so a peer not
	// reaped now was the process whose cgroup Resolve read.
	if pidfd >= 0 {
		if err := notReaped(pidfd); err != nil {
			return Identity{}, fmt.Errorf("peer pid %d: %w", cred.PID, err)
		}
	}
	if err != nil {
		return Identity{}, fmt.Errorf("peer: %w", err)
	}
	return id, nil
}

// peer reads conn's SO_PEERCRED and, when wantPidfd is set, a pidfd for
// the peer (SO_PEERPIDFD), or -1 where the kernel has none to give.
func peer(conn *net.UnixConn, wantPidfd bool) (Cred, int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Cred{}, -1, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		ucred   *unix.Ucred
		credErr error
		pidfd   = -1
		fdErr   error
	)
	if err := raw.Control(func(fd uintptr) {
		ucred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil && wantPidfd {
			pidfd, fdErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		}
	}); err != nil {
		return Cred{}, -1, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return Cred{}, -1, fmt.Errorf("peer credentials: %w", &net.OpError{Op: "getsockopt", Net: "unix", Err: credErr})
	}
	cred := Cred{PID: int(ucred.Pid), UID: ucred.Uid, GID: ucred.Gid}
	switch {
	case fdErr == nil:
	case errors.Is(fdErr, unix.ESRCH):
		// The peer was reaped before a pidfd could be made for it.
		return cred, -1, fmt.Errorf("peer pid %d: %w", cred.PID, ErrNoProcess)
	case errors.Is(fdErr, unix.ENOPROTOOPT), errors.Is(fdErr, unix.ENODATA), errors.Is(fdErr, unix.EINVAL):
		// A kernel before 6.5, or a peer without a pid: resolve by pid alone.
		pidfd = -1
	default:
		return cred, -1, fmt.Errorf("peer pidfd: %w", fdErr)
	}
	return cred, pidfd, nil
}

// notReaped returns nil while the process of pidfd has not been reaped
// (alive, or a zombie: either way its pid is still its own), and an error
// wrapping ErrNoProcess once it has.
func notReaped(pidfd int) error {
	err := unix.PidfdSendSignal(pidfd, 0, nil, 0)
	switch {
	case err == nil, errors.Is(err, unix.EPERM):
		// EPERM: it exists, and belongs to a user this process may not
		// signal.
		return nil
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("exited while resolving: %w", ErrNoProcess)
	default:
		return fmt.Errorf("checking peer pidfd: %w", err)
	}
}
