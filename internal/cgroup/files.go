package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/internal/rawfile"
)

// Names of the cgroup interface files that marshal reads and writes. The
// cgroup v2 core files exist in every non-root group, whatever controllers
// are enabled; a controller's files exist only where it is enabled (v2) or
// in its own hierarchy (v1).
const (
	FileControllers    = "cgroup.controllers"     // v2: controllers this group may enable
	FileSubtreeControl = "cgroup.subtree_control" // v2: controllers enabled for the children
	FileEvents         = "cgroup.events"          // v2: "populated" and "frozen"
	FileProcs          = "cgroup.procs"           // v1 and v2: member processes
	FileThreads        = "cgroup.threads"         // v2: member threads
	FileKill           = "cgroup.kill"            // v2, kernel 5.14+: kills the subtree
	FileFreeze         = "cgroup.freeze"          // v2, kernel 5.2+: freezes the subtree
	FileCPUStat        = "cpu.stat"               // v2: usage_usec and friends, even without the cpu controller

	FileCPUMax        = "cpu.max"        // v2 cpu: "quota period" or "max period"
	FileMemoryMax     = "memory.max"     // v2 memory: bytes or "max"
	FileMemoryCurrent = "memory.current" // v2 memory: bytes in use
	FileMemoryEvents  = "memory.events"  // v2 memory: "oom_kill N" among others
	FilePIDsMax       = "pids.max"       // v1 and v2 pids: count or "max"
	FilePIDsCurrent   = "pids.current"   // v1 and v2 pids: tasks now

	FileCFSQuota      = "cpu.cfs_quota_us"      // v1 cpu: µs per period, -1 for none
	FileCFSPeriod     = "cpu.cfs_period_us"     // v1 cpu: period in µs
	FileMemoryLimit   = "memory.limit_in_bytes" // v1 memory: bytes, a huge value for none
	FileMemoryUsage   = "memory.usage_in_bytes" // v1 memory: bytes in use
	FileMemoryFailcnt = "memory.failcnt"        // v1 memory: times the limit was hit
	FileMemoryOOMCtl  = "memory.oom_control"    // v1 memory: "oom_kill N" among others
	FileCPUAcctUsage  = "cpuacct.usage"         // v1 cpuacct: CPU time in ns
)

// ReadFile returns the content of the interface file name in group dir,
// without surrounding white space. A missing group or file is an error
// that wraps ErrNotFound and fs.ErrNotExist.
func ReadFile(dir, name string) (string, error) {
	b, err := rawfile.Read(filepath.Join(dir, name))
	if err != nil {
		return "", notFound(err)
	}
	return string(bytes.TrimSpace(b)), nil
}

// WriteFile writes value to the interface file name in group dir, in one
// write(2) as the kernel wants it. It never creates the file: a missing
// group or file is an error that wraps ErrNotFound and fs.ErrNotExist.
// The error carries the kernel's errno (EINVAL, EBUSY, ESRCH…) for
// errors.Is.
func WriteFile(dir, name, value string) error {
	path := filepath.Join(dir, name)
	// O_TRUNC is ignored by cgroupfs and makes the same call work on a
	// regular file standing in for a group in tests.
	if err := rawfile.Write(path, []byte(value), os.O_WRONLY|os.O_TRUNC, 0); err != nil {
		return fmt.Errorf("writing %q: %w", value, notFound(err))
	}
	return nil
}

// GroupEvents is the content of a v2 group's cgroup.events.
type GroupEvents struct {
	// Populated reports whether a process lives in the group or below it.
	Populated bool
	// Frozen reports whether the group is frozen.
	Frozen bool
}

// ParseEvents parses the content of cgroup.events ("populated 1\nfrozen
// 0\n"). Unknown keys are ignored; a malformed line is an error.
func ParseEvents(data []byte) (GroupEvents, error) {
	var ev GroupEvents
	err := parseFlatKeyed(data, func(key string, v int64) {
		switch key {
		case "populated":
			ev.Populated = v != 0
		case "frozen":
			ev.Frozen = v != 0
		}
	})
	if err != nil {
		return GroupEvents{}, fmt.Errorf("parsing %s: %w", FileEvents, err)
	}
	return ev, nil
}

// ReadEvents reads the cgroup.events of group dir. A missing group is an
// error that wraps ErrNotFound.
func ReadEvents(dir string) (GroupEvents, error) {
	b, err := rawfile.Read(filepath.Join(dir, FileEvents))
	if err != nil {
		return GroupEvents{}, notFound(err)
	}
	ev, err := ParseEvents(b)
	if err != nil {
		return GroupEvents{}, fmt.Errorf("%s: %w", dir, err)
	}
	return ev, nil
}

// CPUStat is the part of a v2 group's cpu.stat that marshal uses. The
// usage fields exist without the cpu controller; the throttling fields
// only with it (zero otherwise).
type CPUStat struct {
	Usage, User, System time.Duration
	Periods, Throttled  int64
	ThrottledTime       time.Duration
}

// ParseCPUStat parses the content of cpu.stat. Unknown keys are ignored;
// a malformed line is an error.
func ParseCPUStat(data []byte) (CPUStat, error) {
	var s CPUStat
	err := parseFlatKeyed(data, func(key string, v int64) {
		switch key {
		case "usage_usec":
			s.Usage = time.Duration(v) * time.Microsecond
		case "user_usec":
			s.User = time.Duration(v) * time.Microsecond
		case "system_usec":
			s.System = time.Duration(v) * time.Microsecond
		case "nr_periods":
			s.Periods = v
		case "nr_throttled":
			s.Throttled = v
		case "throttled_usec":
			s.ThrottledTime = time.Duration(v) * time.Microsecond
		}
	})
	if err != nil {
		return CPUStat{}, fmt.Errorf("parsing %s: %w", FileCPUStat, err)
	}
	return s, nil
}

// ReadCPUStat reads the cpu.stat of v2 group dir. A missing group is an
// error that wraps ErrNotFound.
func ReadCPUStat(dir string) (CPUStat, error) {
	b, err := rawfile.Read(filepath.Join(dir, FileCPUStat))
	if err != nil {
		return CPUStat{}, notFound(err)
	}
	return ParseCPUStat(b)
}

// parseFlatKeyed calls fn for each "key value" line of a flat keyed file.
func parseFlatKeyed(data []byte, fn func(key string, v int64)) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		key, val, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("line %q: want \"key value\"", line)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		fn(key, v)
	}
	return sc.Err()
}

// ReadInt reads an interface file that holds one integer, such as
// memory.current or pids.current.
func ReadInt(dir, name string) (int64, error) {
	s, err := ReadFile(dir, name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", filepath.Join(dir, name), err)
	}
	return v, nil
}

// ParseMax parses a limit file that holds a count or "max" (pids.max,
// memory.max). "max" is returned as 0: no limit.
func ParseMax(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a count or \"max\": %w", err)
	}
	if v < 0 {
		return 0, fmt.Errorf("want a count or \"max\", got %d", v)
	}
	return v, nil
}

// FormatMax formats a limit for pids.max or memory.max: 0 (no limit) as
// "max", anything else as its decimal value.
func FormatMax(v int64) string {
	if v == 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// CPUMax is a CPU bandwidth limit: Quota of CPU time in every Period, in
// microseconds. Quota 0 means no limit.
type CPUMax struct {
	Quota, Period int64
}

// CPUMaxFromMilli returns the limit that gives milli thousandths of a core
// with the default period: a quota of milli × period / 1000. Zero milli is
// no limit.
func CPUMaxFromMilli(milli int64) CPUMax {
	period := CPUPeriod.Microseconds()
	if milli == 0 {
		return CPUMax{Period: period}
	}
	return CPUMax{Quota: milli * period / 1000, Period: period}
}

// Milli returns the limit in thousandths of a core, rounded down; 0 when
// there is no limit.
func (c CPUMax) Milli() int64 {
	if c.Quota == 0 || c.Period <= 0 {
		return 0
	}
	return c.Quota * 1000 / c.Period
}

// Equal reports whether c and o hold the same limit. Two "no limit" values
// are equal whatever their periods.
func (c CPUMax) Equal(o CPUMax) bool {
	if c.Quota == 0 || o.Quota == 0 {
		return c.Quota == o.Quota
	}
	return c == o
}

// String formats c as cpu.max wants it: "quota period", or "max period".
func (c CPUMax) String() string {
	q := "max"
	if c.Quota != 0 {
		q = strconv.FormatInt(c.Quota, 10)
	}
	return q + " " + strconv.FormatInt(c.Period, 10)
}

// ParseCPUMax parses the content of cpu.max: "max", "max period" or
// "quota period".
func ParseCPUMax(s string) (CPUMax, error) {
	f := strings.Fields(s)
	if len(f) < 1 || len(f) > 2 {
		return CPUMax{}, fmt.Errorf("parsing %s %q: want \"quota period\"", FileCPUMax, s)
	}
	c := CPUMax{Period: CPUPeriod.Microseconds()}
	if len(f) == 2 {
		p, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || p <= 0 {
			return CPUMax{}, fmt.Errorf("parsing %s %q: bad period", FileCPUMax, s)
		}
		c.Period = p
	}
	if f[0] != "max" {
		q, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || q <= 0 {
			return CPUMax{}, fmt.Errorf("parsing %s %q: bad quota", FileCPUMax, s)
		}
		c.Quota = q
	}
	return c, nil
}

// notFound turns fs.ErrNotExist into ErrNotFound, keeping the message.
func notFound(err error) error {
	if err != nil && errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
