package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// causeOf says what failed in marshald's own terms, for a refusal: the
// file and the errno ("write cgroup.procs: permission denied (EACCES)"),
// so that the caller need not read the daemon's log. It is "" when err
// carries no errno: free text from elsewhere (a D-Bus reply, the
// authority) never reaches a refusal.
func causeOf(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	what := errno.Error()
	if name := unix.ErrnoName(errno); name != "" {
		what += " (" + name + ")"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s %s: %s", pe.Op, filepath.Base(pe.Path), what)
	}
	return what
}

// withCause is detail followed by err's cause, when it has one.
func withCause(detail string, err error) string {
	if c := causeOf(err); c != "" {
		return detail + ": " + c
	}
	return detail
}
