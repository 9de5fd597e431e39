package identity

import (
	"errors"
	"fmt"
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

// PidfdNetNS is the network namespace of the process pidfd names, whose
// pid is pid, as OpenNetNS finds it, with nothing left open.
func PidfdNetNS(pidfd, pid int) (NetNS, error) {
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
		if err := NotReaped(pidfd); err != nil {
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
