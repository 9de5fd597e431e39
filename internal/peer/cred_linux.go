package peer

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/identity"
)

// Credentials returns the credentials the kernel recorded (SO_PEERCRED)
// for the process at the other end of conn: the one that connected, or
// that made the socket pair. They are fixed at that moment; the process
// may have exited since.
func Credentials(conn *net.UnixConn) (Cred, error) {
	cred, _, err := credentials(conn, false)
	return cred, err
}

// CredentialsPidfd returns the credentials of the process at the other
// end of conn, as Credentials does, and a pidfd that holds it
// (SO_PEERPIDFD, Linux 6.5), or -1 where the kernel has none to give; the
// caller closes it. The error wraps identity.ErrNoProcess when the peer
// was reaped before a pidfd could be made for it.
func CredentialsPidfd(conn *net.UnixConn) (Cred, int, error) {
	return credentials(conn, true)
}

// identityOf returns the credentials of the process at the other end of
// conn and its identity, as identity.Resolve gives it. The identity is
// that of the peer itself, never of a later process that reused its pid:
// where the kernel hands out a pidfd for the peer (SO_PEERPIDFD, Linux
// 6.5), the peer is confirmed not yet reaped after its cgroup was read.
// The error wraps identity.ErrNoProcess when the peer has exited or its
// pid is not visible here, and identity.ErrNotManaged when it is not in a
// marshal scope; Cred is filled whenever the credentials could be read,
// so a caller can still judge an unmanaged peer by its uid.
func identityOf(conn *net.UnixConn) (Cred, identity.Identity, error) {
	cred, pidfd, err := credentials(conn, true)
	if err != nil {
		return cred, identity.Identity{}, err
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	id, err := resolve(cred, pidfd)
	return cred, id, err
}

// namespaceOf returns the credentials, identity and network namespace of
// the process at the other end of conn, as identityOf and
// identity.OpenNetNS give them, read while one pidfd holds it; where the
// kernel hands out no pidfd for the peer (before Linux 6.5), by its pid
// alone, as identity.Resolve reads its cgroup.
func namespaceOf(conn *net.UnixConn) (Cred, identity.Identity, identity.NetNS, error) {
	cred, pidfd, err := credentials(conn, true)
	if err != nil {
		return cred, identity.Identity{}, identity.NetNS{}, err
	}
	var ns identity.NetNS
	if pidfd >= 0 {
		defer unix.Close(pidfd)
		if ns, err = identity.PidfdNetNS(pidfd, cred.PID); err != nil {
			return cred, identity.Identity{}, identity.NetNS{}, fmt.Errorf("peer: %w", err)
		}
	} else if cred.PID > 0 {
		var st unix.Stat_t
		if err := unix.Stat("/proc/"+strconv.Itoa(cred.PID)+"/ns/net", &st); err != nil {
			return cred, identity.Identity{}, identity.NetNS{}, fmt.Errorf("peer pid %d: %w", cred.PID, identity.ErrNoProcess)
		}
		ns = identity.NetNS{Dev: st.Dev, Ino: st.Ino}
	}
	id, err := resolve(cred, pidfd)
	return cred, id, ns, err
}

// groupOf returns the credentials of the process at the other end of
// conn, the id of its cgroup2 group (the group directory's inode number,
// as a TCP socket carries it) and its network namespace, all asked of
// one pidfd that holds the process: the kernel names the group of the
// peer itself (PIDFD_GET_INFO, Linux 6.13), never of a later process
// that reused its pid, and no /proc file is read, which is most of what
// namespaceOf costs. The error wraps identity.ErrNoProcess when the peer
// has been reaped, and errors.ErrUnsupported when the kernel gives no
// pidfd for the peer or no group id for a pidfd: namespaceOf serves then.
func groupOf(conn *net.UnixConn) (Cred, uint64, identity.NetNS, error) {
	cred, pidfd, err := credentials(conn, true)
	if err != nil {
		return cred, 0, identity.NetNS{}, err
	}
	if pidfd < 0 {
		return cred, 0, identity.NetNS{}, fmt.Errorf("peer group: no pidfd for the peer: %w", errors.ErrUnsupported)
	}
	defer unix.Close(pidfd)
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CGROUPID}
	err = unix.IoctlPidfdInfo(pidfd, &info)
	switch {
	case errors.Is(err, unix.ESRCH):
		return cred, 0, identity.NetNS{}, fmt.Errorf("peer pid %d: %w", cred.PID, identity.ErrNoProcess)
	case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL):
		return cred, 0, identity.NetNS{}, fmt.Errorf("peer group: %w", errors.ErrUnsupported)
	case err != nil:
		return cred, 0, identity.NetNS{}, fmt.Errorf("peer pid %d: group: %w", cred.PID, err)
	case info.Mask&unix.PIDFD_INFO_CGROUPID == 0:
		return cred, 0, identity.NetNS{}, fmt.Errorf("peer group: the kernel names none: %w", errors.ErrUnsupported)
	}
	ns, err := identity.PidfdNetNS(pidfd, cred.PID)
	if err != nil {
		return cred, 0, identity.NetNS{}, fmt.Errorf("peer: %w", err)
	}
	return cred, info.Cgroupid, ns, nil
}

// resolve resolves the peer cred names, confirmed by its pidfd (-1 for
// none) not to have been reaped meanwhile.
func resolve(cred Cred, pidfd int) (identity.Identity, error) {
	if cred.PID == 0 {
		return identity.Identity{}, fmt.Errorf("peer pid not visible in this pid namespace: %w", identity.ErrNoProcess)
	}
	id, err := identity.Resolve(cred.PID)
	if errors.Is(err, identity.ErrNoProcess) {
		return identity.Identity{}, fmt.Errorf("peer: %w", err)
	}
	// Until the peer is reaped its pid cannot be reused, so a peer not
	// reaped now was the process whose cgroup Resolve read.
	if pidfd >= 0 {
		if err := identity.NotReaped(pidfd); err != nil {
			return identity.Identity{}, fmt.Errorf("peer pid %d: %w", cred.PID, err)
		}
	}
	if err != nil {
		return identity.Identity{}, fmt.Errorf("peer: %w", err)
	}
	return id, nil
}

// credentials reads conn's SO_PEERCRED and, when wantPidfd is set, a
// pidfd for the peer (SO_PEERPIDFD), or -1 where the kernel has none to
// give.
func credentials(conn *net.UnixConn, wantPidfd bool) (Cred, int, error) {
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
		return cred, -1, fmt.Errorf("peer pid %d: %w", cred.PID, identity.ErrNoProcess)
	case errors.Is(fdErr, unix.ENOPROTOOPT), errors.Is(fdErr, unix.ENODATA), errors.Is(fdErr, unix.EINVAL):
		// A kernel before 6.5, or a peer without a pid: resolve by pid alone.
		pidfd = -1
	default:
		return cred, -1, fmt.Errorf("peer pidfd: %w", fdErr)
	}
	return cred, pidfd, nil
}
