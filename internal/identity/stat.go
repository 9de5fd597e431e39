package identity

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/marshal-dev/marshal/internal/rawfile"
)

// StatFields returns the fields of a /proc/<pid>/stat (or task stat) line
// from field 3, the state, on: fields[0] is field 3, fields[n] is field
// n+3. The command name, field 2, may hold spaces and parentheses itself,
// so fields are counted after its last ')'.
func StatFields(data []byte) ([]string, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, errors.New("stat line without a command name")
	}
	return strings.Fields(string(data[i+1:])), nil
}

// Stat is what marshal reads of a /proc/<pid>/stat (or task stat) line.
type Stat struct {
	// State is field 3: 'R', 'S', 'Z' and so on.
	State byte
	// Parent is field 4, the parent's pid.
	Parent int
	// Nice is field 19.
	Nice int
	// StartTime is field 22, in clock ticks after boot: with the pid, it
	// tells a process from a later one that reuses the pid.
	StartTime uint64
	// ExitCode is field 52, a zombie's wait status; HasExitCode is false
	// where the kernel does not show it.
	ExitCode    uint32
	HasExitCode bool
}

// ParseStat reads a /proc/<pid>/stat (or task stat) line.
func ParseStat(data []byte) (Stat, error) {
	f, err := StatFields(data)
	if err != nil {
		return Stat{}, err
	}
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("stat line has %d fields after the command name", len(f))
	}
	st := Stat{State: f[0][0]}
	if st.Parent, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("stat parent %q: %w", f[1], err)
	}
	if st.Nice, err = strconv.Atoi(f[16]); err != nil {
		return Stat{}, fmt.Errorf("stat nice %q: %w", f[16], err)
	}
	if st.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat start time %q: %w", f[19], err)
	}
	if len(f) >= 50 {
		code, err := strconv.ParseUint(f[49], 10, 32)
		if err != nil {
			return Stat{}, fmt.Errorf("stat exit code %q: %w", f[49], err)
		}
		st.ExitCode, st.HasExitCode = uint32(code), true
	}
	return st, nil
}

// ReadStat reads the stat file at path: /proc/<pid>/stat,
// /proc/<pid>/task/<tid>/stat, or one under another proc mount. A
// process that is gone is an error wrapping fs.ErrNotExist.
func ReadStat(path string) (Stat, error) {
	data, err := rawfile.Read(path)
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(data)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// StatPath is the stat file of pid under /proc.
func StatPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/stat" }
