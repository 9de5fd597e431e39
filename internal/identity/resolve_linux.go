package identity

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// maxProcCgroup bounds the read of /proc/<pid>/cgroup: one line per
// hierarchy, each path at most PATH_MAX, and a dozen hierarchies on a
// hybrid host fit well within it.
const maxProcCgroup = 64 << 10

// bufPool holds read buffers, so a resolve allocates only the strings it
// returns.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

// Resolve returns the identity of process pid, read from
// /proc/<pid>/cgroup. It returns an error wrapping ErrNoProcess when the
// process does not exist and ErrNotManaged when it is not in a marshal
// scope. A process in a group below its scope resolves to the scope.
//
// It reads procfs, which does not block, so it takes no context. The
// answer holds at the moment of the read; a caller that must know it is
// still the same process pins it with a pidfd, as package peer does.
func Resolve(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	data, err := readProcCgroup(pid, (*bp)[:0])
	*bp = data[:0] // keep the buffer if it grew
	if err != nil {
		return Identity{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	id, err := parseProcCgroup(data)
	if err != nil {
		return Identity{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	id.PID = pid
	return id, nil
}

// readProcCgroup appends the contents of /proc/<pid>/cgroup to buf, up to
// maxProcCgroup bytes. The kernel renders the file whole on the first
// read, so the lines are one consistent snapshot however many reads it
// takes to copy them.
func readProcCgroup(pid int, buf []byte) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/cgroup"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return buf, procError("open", path, err)
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(len(buf), 4<<10))
		}
		// Read one byte past the bound to tell a file of exactly
		// maxProcCgroup bytes from a longer one.
		room := buf[len(buf):min(cap(buf), maxProcCgroup+1)]
		n, err := unix.Read(fd, room)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, procError("read", path, err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) > maxProcCgroup {
			return buf, fmt.Errorf("%s: longer than %d bytes", path, maxProcCgroup)
		}
	}
}

// procError maps the errors that mean the process is gone to ErrNoProcess:
// ENOENT at the open, ESRCH when it is reaped between open and read.
func procError(op, path string, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return ErrNoProcess
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
