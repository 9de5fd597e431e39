package apiserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxGroups bounds the supplementary groups read for a peer (the
// kernel's NGROUPS_MAX).
const maxGroups = 65536

// peerGroups returns the supplementary groups the kernel recorded for the
// peer of conn when it connected (SO_PEERGROUPS).
func peerGroups(conn *net.UnixConn) ([]uint32, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer groups: %w", err)
	}
	var (
		groups []uint32
		gerr   error
	)
	if err := raw.Control(func(fd uintptr) {
		buf := make([]uint32, 64)
		for {
			size := uint32(len(buf) * 4)
			_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_PEERGROUPS,
				uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
			if errno == unix.ERANGE && int(size/4) > len(buf) && size/4 <= maxGroups {
				// size now holds the length the kernel needs.
				buf = make([]uint32, size/4)
				continue
			}
			if errno != 0 {
				gerr = errno
				return
			}
			groups = buf[:size/4]
			return
		}
	}); err != nil {
		return nil, fmt.Errorf("peer groups: %w", err)
	}
	if gerr != nil {
		return nil, fmt.Errorf("peer groups: %w", &net.OpError{Op: "getsockopt", Net: "unix", Err: gerr})
	}
	return groups, nil
}

// lockFile opens path and takes an exclusive lock on it without waiting;
// ErrInUse when another process holds it. Closing the file releases it;
// unlockFile removes it first.
//
// The lock is on the file at path when lockFile returns: a holder that
// stops unlinks the file before it lets go, so a process that opened
// the file before that and locks it after finds that path names another
// file, or none, and tries again on what path names now.
func lockFile(path string) (*os.File, error) {
	for range 16 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("socket lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s is locked: %w; is marshald already running? stop it first, or choose another socket path", path, ErrInUse)
			}
			return nil, fmt.Errorf("socket lock %s: %w", path, err)
		}
		if sameFile(f, path) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("socket lock %s: replaced again and again while being locked: %w", path, ErrInUse)
}

// unlockFile removes the lock file at path, when it is still the locked
// file f, and then releases the lock.
func unlockFile(f *os.File, path string) {
	if sameFile(f, path) {
		os.Remove(path)
	}
	f.Close()
}

// sameFile reports whether path names the open file f.
func sameFile(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Lstat(path)
	return err == nil && os.SameFile(held, named)
}
