package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// runTerm is what run decided about the terminal.
type runTerm struct {
	// pty: the agent runs on the terminal that is standard input.
	pty bool
	// detach: standard input is a terminal the agent must not have.
	detach bool
}

// runTerminal decides whether the agent runs on a terminal: --pty needs
// standard input to be one, --no-pty detaches from it, and by default the
// agent runs on one when standard input is one.
func runTerminal(o runOptions) (runTerm, error) {
	_, err := unix.IoctlGetTermios(0, unix.TCGETS)
	onTerminal := err == nil
	switch {
	case o.pty && !onTerminal:
		return runTerm{}, usageError("--pty: standard input is not a terminal")
	case o.noPTY && onTerminal:
		if sid, err := unix.Getsid(0); err == nil && sid == os.Getpid() {
			// Giving up the terminal as its session leader would hang
			// up the whole session.
			return runTerm{}, usageError("--no-pty: marshalctl leads its session and cannot give up its terminal; run it from a shell, or redirect standard input")
		}
		return runTerm{detach: true}, nil
	case o.noPTY:
		return runTerm{}, nil
	}
	return runTerm{pty: onTerminal}, nil
}

// execPlan becomes the agent: it gives up the terminal when asked, enters
// the workspace root and execs. It returns only when that fails.
func execPlan(p *localapi.ExecPlan, term runTerm) error {
	if term.detach {
		if err := detachTerminal(); err != nil {
			return err
		}
	}
	if err := os.Chdir(p.Dir); err != nil {
		return err
	}
	env := make([]string, len(p.Env))
	for i, kv := range p.Env {
		env[i] = string(kv)
	}
	return syscall.Exec(p.Path, p.Argv, env)
}

// detachTerminal replaces standard input by /dev/null and gives up the
// controlling terminal, so that the agent can neither read it nor open
// /dev/tty.
func detachTerminal() error {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	tty, err := os.Open("/dev/tty")
	if err == nil {
		defer tty.Close()
		// TIOCNOTTY takes no argument; ENOTTY: it is not our controlling
		// terminal after all.
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, tty.Fd(), unix.TIOCNOTTY, 0); errno != 0 && !errors.Is(errno, unix.ENOTTY) {
			return fmt.Errorf("giving up the terminal: %w", errno)
		}
	}
	if err := unix.Dup2(int(null.Fd()), 0); err != nil {
		return fmt.Errorf("replacing standard input: %w", err)
	}
	return nil
}

// runConn is the connection of a run request: a unix socket used with
// blocking reads and writes. The net package would set up its poller (an
// epoll instance, an eventfd and their registrations) for this one
// connection: about 0.07 ms of every launch.
type runConn struct {
	fd int
	// mu guards closed, so that Shutdown, called from another
	// goroutine, never touches a descriptor Close gave back.
	mu     sync.Mutex
	closed bool
}

// dialRun connects to the socket. A listener whose backlog is full
// refuses at once, as the net package does, rather than holding
// marshalctl in a connect that an interrupt cannot end.
func dialRun(socket string) (runConnection, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: socket}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	return &runConn{fd: fd}, nil
}

func (c *runConn) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(c.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *runConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := unix.Write(c.fd, p[written:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return written, os.NewSyscallError("write", err)
		}
		written += n
	}
	return written, nil
}

// Shutdown ends both directions: a Read or Write blocked in another
// goroutine returns, and marshald sees the caller go away.
func (c *runConn) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		unix.Shutdown(c.fd, unix.SHUT_RDWR)
	}
}

func (c *runConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return unix.Close(c.fd)
}
