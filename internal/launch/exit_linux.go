package launch

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/identity"
)

// ExitStatus returns the wait status of the process once it has exited,
// as its parent reads it: the kernel keeps it with the pidfd once the
// parent has reaped the process (PIDFD_GET_INFO, Linux 6.15), and in
// field 52 of /proc/<pid>/stat while it is a zombie, which marshald, not
// its parent, cannot reap. It reports false while the process runs, and
// when neither tells (an older kernel, and the process reaped already).
func (p *Process) ExitStatus() (syscall.WaitStatus, bool) {
	if !p.Exited() {
		return 0, false
	}
	// Reaped between the two reads, the process is in the pidfd's record
	// by the second.
	for range 2 {
		if ws, ok := p.reapedStatus(); ok {
			return ws, true
		}
		if ws, ok := p.zombieStatus(); ok {
			return ws, true
		}
	}
	return 0, false
}

// reapedStatus is the exit the pidfd's record holds once the process is
// reaped.
func (p *Process) reapedStatus() (syscall.WaitStatus, bool) {
	rc, err := p.fd.SyscallConn()
	if err != nil {
		return 0, false
	}
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlPidfdInfo(int(fd), &info) }); err != nil || ierr != nil {
		return 0, false
	}
	if info.Mask&unix.PIDFD_INFO_EXIT == 0 {
		return 0, false
	}
	return syscall.WaitStatus(uint32(info.Exit_code)), true
}

// zombieStatus is the exit code /proc/<pid>/stat shows while the process
// is a zombie; its start time proves the pid is still this process's.
func (p *Process) zombieStatus() (syscall.WaitStatus, bool) {
	st, err := identity.ReadStat(identity.StatPath(p.PID))
	if err != nil || st.State != 'Z' || st.StartTime != p.StartTime || !st.HasExitCode {
		return 0, false
	}
	return syscall.WaitStatus(st.ExitCode), true
}
