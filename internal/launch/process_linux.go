package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/peer"
)

// PinPeer pins the process at the other end of conn, the caller of a
// request: the pid and uid SO_PEERCRED recorded when it connected, held
// by the pidfd SO_PEERPIDFD gives (Linux 6.5), or else by one opened for
// that pid, whose start time is then read. It returns an error wrapping
// ErrProcessGone when the caller has exited.
func PinPeer(conn *net.UnixConn) (*Process, error) {
	cred, pidfd, err := peer.CredentialsPidfd(conn)
	switch {
	case errors.Is(err, identity.ErrNoProcess):
		return nil, fmt.Errorf("caller pid %d: %w", cred.PID, ErrProcessGone)
	case err != nil:
		return nil, fmt.Errorf("pinning the caller: %w", err)
	case cred.PID <= 0:
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		return nil, fmt.Errorf("caller pid not visible here: %w", ErrProcessGone)
	case pidfd < 0:
		// A kernel without SO_PEERPIDFD: open one for the pid, which the
		// start time then confirms.
		return Pin(cred.PID, cred.UID, 0)
	}
	return pinned(pidfd, cred.PID, cred.UID, 0)
}

// Pin pins the running process pid of uid. want, when not zero, is the
// start time the process must have: one recorded before a restart, so
// that a pid reused since is not taken for it. It returns an error
// wrapping ErrProcessGone when the process has exited or its start time
// is not want.
func Pin(pid int, uid uint32, want uint64) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrProcessGone)
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrProcessGone)
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return pinned(fd, pid, uid, want)
}

// pinned completes a pin of pid by pidfd fd, which it owns: the start
// time is read while the pidfd holds the pid, and the process is then
// confirmed not yet reaped, so the start time is its own.
func pinned(fd, pid int, uid uint32, want uint64) (_ *Process, err error) {
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	start, err := admission.Procfs{}.StartTime(pid)
	if errors.Is(err, admission.ErrNoProcess) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrProcessGone)
	}
	if err != nil {
		return nil, err
	}
	// Until it is reaped a process keeps its pid, so a process not
	// reaped now is the one whose stat was read.
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrProcessGone)
	} else if err != nil && !errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	if want != 0 && start != want {
		return nil, fmt.Errorf("pid %d started at %d, not %d: %w", pid, start, want, ErrProcessGone)
	}
	// Non-blocking, the pidfd is registered with the poller, so that a
	// wait for the exit parks no thread.
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	return &Process{PID: pid, UID: uid, StartTime: start, fd: os.NewFile(uintptr(fd), "pidfd")}, nil
}

// Exited reports whether the process has exited. A closed Process
// reports true.
func (p *Process) Exited() bool {
	rc, err := p.fd.SyscallConn()
	if err != nil {
		return true
	}
	exited := true
	if err := rc.Control(func(fd uintptr) { exited = pidfdReadable(int(fd)) }); err != nil {
		return true
	}
	return exited
}

// Wait blocks until the process exits, and returns nil then; ctx.Err()
// when ctx ends first, and an error when the Process is closed first.
// One Wait at a time.
func (p *Process) Wait(ctx context.Context) error {
	rc, err := p.fd.SyscallConn()
	if err != nil {
		return err
	}
	// A deadline an earlier Wait's context set is not this one's.
	if err := p.fd.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { p.fd.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd)) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// pidfdReadable reports whether pidfd fd is readable: its process has
// exited.
func pidfdReadable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
}

// CooperativeNice is the nice value that holds an agent's CPU at the
// cooperative level: scheduling priority below interactive work, not a
// limit.
const CooperativeNice = 10

// deprioritize sets the nice value of every thread of p to
// CooperativeNice and reads them back from /proc: the cooperative level is
// applied, and confirmed, like a kernel limit. Linux keeps a nice value
// per thread, and the caller execs from whichever thread its runtime
// chose, so each one is set; a thread cloned meanwhile inherits its
// creator's value, and the loop sets it on the next round.
func (p *Process) deprioritize() (bool, error) {
	for range 5 {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.PID))
		if err != nil {
			return false, err
		}
		done := true
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if nice, err := readNice(fmt.Sprintf("/proc/%d/task/%d/stat", p.PID, tid)); err == nil && nice == CooperativeNice {
				continue
			}
			done = false
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, CooperativeNice); err != nil && !errors.Is(err, unix.ESRCH) {
				return false, fmt.Errorf("setting the priority of thread %d of pid %d: %w", tid, p.PID, err)
			}
		}
		if done {
			return !p.Exited(), nil
		}
	}
	return false, nil
}

// readNice reads field 19 (nice) of a stat file of /proc.
func readNice(path string) (int, error) {
	st, err := identity.ReadStat(path)
	return st.Nice, err
}

// openNetNS opens the process's network namespace (identity.OpenNetNS).
func (p *Process) openNetNS() (*os.File, identity.NetNS, error) {
	rc, err := p.fd.SyscallConn()
	if err != nil {
		return nil, identity.NetNS{}, err
	}
	var (
		f    *os.File
		ns   identity.NetNS
		nerr error
	)
	if err := rc.Control(func(fd uintptr) { f, ns, nerr = identity.OpenNetNS(int(fd), p.PID) }); err != nil {
		return nil, identity.NetNS{}, err
	}
	return f, ns, nerr
}
