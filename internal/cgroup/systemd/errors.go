package systemd

import (
	"errors"
	"fmt"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

var (
	// ErrNoBus is returned by FindBus, and so by New, when no socket or
	// address of the requested manager is present. It wraps
	// cgroup.ErrUnavailable; the wrapping error names every place looked
	// at.
	ErrNoBus = fmt.Errorf("no systemd manager bus: %w", cgroup.ErrUnavailable)

	// ErrDisconnected is returned by Watch when its connection to the
	// manager closes before its context ends: the manager or the bus went
	// away. Calling Watch again reconnects.
	ErrDisconnected = errors.New("systemd: connection to the manager closed")
)

// JobError is returned when a job that marshal queued (starting or
// stopping a unit) finished with a result other than "done".
type JobError struct {
	// Unit is the unit the job was for.
	Unit string
	// Job is "start" or "stop".
	Job string
	// Result is systemd's result: "canceled", "timeout", "failed",
	// "dependency" or "skipped".
	Result string
}

func (e *JobError) Error() string {
	return fmt.Sprintf("systemd: %s job for %s finished %q, not \"done\"", e.Job, e.Unit, e.Result)
}
