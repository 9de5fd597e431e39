package launch

import (
	"fmt"
	"syscall"
)

// Exit is how a launch ended, as the kernel tells it.
type Exit struct {
	// Status is the launched process's wait status, when Known.
	Status syscall.WaitStatus
	// Known reports whether the process's end could be read: not for a
	// process that was gone when marshald started, nor on a kernel
	// before 6.15 once its parent has reaped it.
	Known bool
	// OOMKills counts the processes of the scope the kernel's OOM killer
	// killed (package cgroup's usage reader).
	OOMKills int64
}

// Failed reports whether the launch ended badly: a status other than 0,
// a signal, or an OOM kill in its scope.
func (e Exit) Failed() bool {
	return e.OOMKills > 0 || e.Known && (!e.Status.Exited() || e.Status.ExitStatus() != 0)
}

// String says how the launch ended, in fixed phrases and numbers:
// "exited with status 3", "killed by signal 9 (killed)", "exit status not
// known", followed by "; the kernel OOM-killed N process(es) of its
// scope" when it did (the agent itself, or a process it ran).
func (e Exit) String() string {
	var s string
	switch {
	case !e.Known:
		s = "exit status not known"
	case e.Status.Signaled():
		s = fmt.Sprintf("killed by signal %d (%v)", int(e.Status.Signal()), e.Status.Signal())
		if e.Status.CoreDump() {
			s += ", core dumped"
		}
	default:
		s = fmt.Sprintf("exited with status %d", e.Status.ExitStatus())
	}
	switch {
	case e.OOMKills == 1:
		s += "; the kernel OOM-killed 1 process of its scope"
	case e.OOMKills > 1:
		s += fmt.Sprintf("; the kernel OOM-killed %d processes of its scope", e.OOMKills)
	}
	return s
}
