package admission

import (
	"fmt"
	"strconv"

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
	// Fields after the name start at field 3 (state); start time is 22.
	fields, err := identity.StatFields(data)
	if err != nil {
		return 0, 0, err
	}
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("stat line has %d fields after the command name", len(fields))
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat start time %q: %w", fields[19], err)
	}
	return fields[0][0], start, nil
}
