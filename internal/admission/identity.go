package admission

import (
	"github.com/marshal-dev/marshal/internal/identity"
)

// Inspector reads kernel identities. The authority reads a caller's start
// time itself, so that a reused pid is never taken for the same process.
type Inspector interface {
	// BootID returns the boot's ID (/proc/sys/kernel/random/boot_id).
	BootID() (string, error)
	// StartTime returns field 22 of /proc/<pid>/stat. It returns an error
	// wrapping ErrNoProcess when pid is not running or is a zombie.
	StartTime(pid int) (uint64, error)
}

// ParseStat returns the state and the start time of a /proc/<pid>/stat
// line. The command name in parentheses may hold spaces and parentheses
// itself, so fields are counted after its last ')'.
func ParseStat(data []byte) (state byte, start uint64, err error) {
	st, err := identity.ParseStat(data)
	if err != nil {
		return 0, 0, err
	}
	return st.State, st.StartTime, nil
}
