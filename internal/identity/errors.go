package identity

import "errors"

var (
	// ErrNoProcess is returned when the process does not exist, has been
	// reaped, or is not visible here (another pid namespace, or /proc
	// mounted with hidepid).
	ErrNoProcess = errors.New("identity: no such process")
	// ErrNotManaged is returned when the process exists but no cgroup
	// hierarchy read places it in a marshal scope.
	ErrNotManaged = errors.New("identity: not in a marshal scope")
)
