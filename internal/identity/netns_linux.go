package identity

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pidfdGetNetNamespace is PIDFD_GET_NET_NAMESPACE (Linux 6.11):
// _IO(PIDFS_IOCTL_MAGIC, 4), an nsfs fd for a pidfd's process's network
// namespace.
const pidfdGetNetNamespace = 0xff04

// SelfNetNS returns this process's network namespace.
func SelfNetNS() (NetNS, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return NetNS{}, fmt.Errorf("this process's network namespace: %w", err)
	}
	return NetNS{Dev: st.Dev, Ino: st.Ino}, nil
}

// OpenNetNS opens the network namespace of the process that pidfd names,
// whose pid is pid: asked of the pidfd itself where the kernel can
// (Linux 6.11), else of /proc/<pid>/ns/net, confirmed by the pidfd to be
// that process's. The file it returns holds the namespace alive, and its
// identity with it, until it is closed. The error wraps ErrNoProcess when
// the process is gone.
func OpenNetNS(pidfd, pid int) (*os.File, NetNS, error) {
	fd, ns, err := openNetNS(pidfd, pid)
	if err != nil {
		return nil, NetNS{}, err
	}
	return os.NewFile(uintptr(fd), "netns"), ns, nil
}

// netNSOf is the network namespace of the process pidfd names, as
// OpenNetNS finds it, with nothing left open.
func netNSOf(pidfd, pid int) (NetNS, error) {
	fd, ns, err := openNetNS(pidfd, pid)
	if err == nil {
		unix.Close(fd)
	}
	return ns, err
}

// openNetNS is OpenNetNS's descriptor.
func openNetNS(pidfd, pid int) (int, NetNS, error) {
	fd, err := unix.IoctlRetInt(pidfd, pidfdGetNetNamespace)
	switch {
	case err == nil:
	case errors.Is(err, unix.ESRCH):
		return -1, NetNS{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
		fd, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return -1, NetNS{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		if err != nil {
			return -1, NetNS{}, fmt.Errorf("network namespace of pid %d: %w", pid, err)
		}
		// Until it is reaped a process keeps its pid: one not reaped now
		// is the one whose namespace was opened.
		if err := notReaped(pidfd); err != nil {
			unix.Close(fd)
			return -1, NetNS{}, fmt.Errorf("pid %d: %w", pid, err)
		}
	default:
		return -1, NetNS{}, fmt.Errorf("network namespace of pid %d: %w", pid, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, NetNS{}, fmt.Errorf("network namespace of pid %d: %w", pid, err)
	}
	return fd, NetNS{Dev: st.Dev, Ino: st.Ino}, nil
}

// PeerNetNS returns the credentials, identity and network namespace of
// the process at the other end of conn, as PeerIdentity and OpenNetNS
// give them, read while one pidfd holds it; where the kernel hands out no
// pidfd for the peer (before Linux 6.5), by its pid alone, as Resolve
// reads its cgroup.
func PeerNetNS(conn *net.UnixConn) (Cred, Identity, NetNS, error) {
	cred, pidfd, err := peer(conn, true)
	if err != nil {
		return cred, Identity{}, NetNS{}, err
	}
	var ns NetNS
	if pidfd >= 0 {
		defer unix.Close(pidfd)
		if ns, err = netNSOf(pidfd, cred.PID); err != nil {
			return cred, Identity{}, NetNS{}, fmt.Errorf("peer: %w", err)
		}
	} else if cred.PID > 0 {
		var st unix.Stat_t
		if err := unix.Stat("/proc/"+strconv.Itoa(cred.PID)+"/ns/net", &st); err != nil {
			return cred, Identity{}, NetNS{}, fmt.Errorf("peer pid %d: %w", cred.PID, ErrNoProcess)
		}
		ns = NetNS{Dev: st.Dev, Ino: st.Ino}
	}
	id, err := resolvePeer(cred, pidfd)
	return cred, id, ns, err
}

// PeerGroup returns the credentials of the process at the other end of
// conn, the id of its cgroup2 group (the group directory's inode number,
// as a TCP socket carries it) and its network namespace, all asked of
// one pidfd that holds the process: the kernel names the group of the
// peer itself (PIDFD_GET_INFO, Linux 6.13), never of a later process
// that reused its pid, and no /proc file is read, which is most of what
// PeerNetNS costs. The error wraps ErrNoProcess when the peer has been
// reaped, and errors.ErrUnsupported when the kernel gives no pidfd for
// the peer or no group id for a pidfd: PeerNetNS serves then.
func PeerGroup(conn *net.UnixConn) (Cred, uint64, NetNS, error) {
	cred, pidfd, err := peer(conn, true)
	if err != nil {
		return cred, 0, NetNS{}, err
	}
	if pidfd < 0 {
		return cred, 0, NetNS{}, fmt.Errorf("peer group: no pidfd for the peer: %w", errors.ErrUnsupported)
	}
	defer unix.Close(pidfd)
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CGROUPID}
	err = unix.IoctlPidfdInfo(pidfd, &info)
	switch {
	case errors.Is(err, unix.ESRCH):
		return cred, 0, NetNS{}, fmt.Errorf("peer pid %d: %w", cred.PID, ErrNoProcess)
	case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL):
		return cred, 0, NetNS{}, fmt.Errorf("peer group: %w", errors.ErrUnsupported)
	case err != nil:
		return cred, 0, NetNS{}, fmt.Errorf("peer pid %d: group: %w", cred.PID, err)
	case info.Mask&unix.PIDFD_INFO_CGROUPID == 0:
		return cred, 0, NetNS{}, fmt.Errorf("peer group: the kernel names none: %w", errors.ErrUnsupported)
	}
	ns, err := netNSOf(pidfd, cred.PID)
	if err != nil {
		return cred, 0, NetNS{}, fmt.Errorf("peer: %w", err)
	}
	return cred, info.Cgroupid, ns, nil
}
