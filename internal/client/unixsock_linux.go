package client

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// unixSocket is a connected unix socket used with blocking reads and
// writes. The net package would set up its poller (an epoll instance, an
// eventfd and their registrations) for this one connection: about 0.07 ms
// of every command, which a run pays before its agent starts.
type unixSocket struct {
	fd int
}

// dialUnix connects to the socket at path. A listener whose backlog is
// full refuses at once (EAGAIN), as the net package does, rather than
// holding the caller in a connect that no cancellation can end.
func dialUnix(path string) (*unixSocket, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	return &unixSocket{fd: fd}, nil
}

// Read and Write use package syscall's, not unix's: the race detector
// then pairs them with the net package's I/O at the other end, as it
// does for two net connections.

func (s *unixSocket) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(s.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (s *unixSocket) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := syscall.Write(s.fd, p[written:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return written, os.NewSyscallError("write", err)
		}
		written += n
	}
	return written, nil
}

// shutdown ends both directions: a Read or Write blocked in another
// goroutine returns, and the peer sees the caller go away. It may run
// concurrently with Read and Write, never with or after close.
func (s *unixSocket) shutdown() { unix.Shutdown(s.fd, unix.SHUT_RDWR) }

func (s *unixSocket) close() error { return unix.Close(s.fd) }
