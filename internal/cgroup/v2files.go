package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	FilePIDsMax       = "pids.max"       // v1 and v2 pids: count or "max"
	FilePIDsCurrent   = "pids.current"   // v1 and v2 pids: tasks now

	FileCFSQuota      = "cpu.cfs_quota_us"      // v1 cpu: µs per period, -1 for none
	FileCFSPeriod     = "cpu.cfs_period_us"     // v1 cpu: period in µs
	FileMemoryLimit   = "memory.limit_in_bytes" // v1 memory: bytes, a huge value for none
	FileMemoryUsage   = "memory.usage_in_bytes" // v1 memory: bytes in use
	FileMemoryFailcnt = "memory.failcnt"        // v1 memory: times the limit was hit
	FileMemoryOOMCtl  = "memory.oom_control"    // v1 memory: "oom_kill N" among others
)

// CPUPeriod is the CFS period marshal writes with every CPU limit: the
// kernel's default of 100 ms.
const CPUPeriod = 100 * time.Millisecond

// Controller returns the name of the kernel controller that limits r, the
// same in v1 and v2: "cpu", "memory" or "pids".
func Controller(r Resource) string {
	return string(r)
}

// LimitFile returns the interface file that holds r's limit under method
// m: cpu.max, memory.max, pids.max for cgroup_v2; cpu.cfs_quota_us (with
// cpu.cfs_period_us beside it), memory.limit_in_bytes, pids.max for
// cgroup_v1. It returns "" for any other method.
func LimitFile(r Resource, m Method) string {
	switch m {
	case MethodCgroupV2:
		switch r {
		case CPU:
			return FileCPUMax
		case Memory:
			return FileMemoryMax
		case PIDs:
			return FilePIDsMax
		}
	case MethodCgroupV1:
		switch r {
		case CPU:
			return FileCFSQuota
		case Memory:
			return FileMemoryLimit
		case PIDs:
			return FilePIDsMax
		}
	}
	return ""
}

// ReadFile returns the content of the interface file name in group dir,
// without surrounding white space. A missing group or file is an error
// that wraps ErrNotFound and fs.ErrNotExist.
func ReadFile(dir, name string) (string, error) {
	b, err := readFile(filepath.Join(dir, name))
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
	if err := writeFile(path, value); err != nil {
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
	b, err := readFile(filepath.Join(dir, FileEvents))
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
	b, err := readFile(filepath.Join(dir, FileCPUStat))
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

// readCFS reads the v1 cpu.cfs_quota_us and cpu.cfs_period_us of dir.
func readCFS(dir string) (CPUMax, error) {
	q, err := ReadInt(dir, FileCFSQuota)
	if err != nil {
		return CPUMax{}, err
	}
	p, err := ReadInt(dir, FileCFSPeriod)
	if err != nil {
		return CPUMax{}, err
	}
	if q < 0 {
		q = 0
	}
	return CPUMax{Quota: q, Period: p}, nil
}

// v1MemoryUnlimited reports whether v, read from memory.limit_in_bytes,
// means no limit: the kernel shows its page counter's maximum, the largest
// int64 rounded down to a page (-1 is what is written for it).
func v1MemoryUnlimited(v int64) bool {
	return v < 0 || v >= math.MaxInt64&^int64(os.Getpagesize()-1)
}

// sameMemoryLimit reports whether the kernel holding got enforces the
// limit want. The kernel counts memory in pages and rounds a written limit
// down to one, so a limit of want bytes and of want rounded down to a page
// are the same limit.
func sameMemoryLimit(got, want int64) bool {
	return got == want || want != 0 && got == want&^int64(os.Getpagesize()-1)
}

// ReadLimit reads the limit of r that group dir holds under method m
// (cgroup_v2 or cgroup_v1, see LimitFile), in the units of Limits: CPU in
// thousandths of a core, memory in bytes, tasks as a count. It returns 0
// when the group has no limit. A missing group or file is an error that
// wraps ErrNotFound and fs.ErrNotExist.
func ReadLimit(dir string, r Resource, m Method) (int64, error) {
	name := LimitFile(r, m)
	if name == "" {
		return 0, fmt.Errorf("no %s limit file under method %q", r, m)
	}
	switch {
	case r == CPU && m == MethodCgroupV1:
		c, err := readCFS(dir)
		return c.Milli(), err
	case r == CPU:
		s, err := ReadFile(dir, name)
		if err != nil {
			return 0, err
		}
		c, err := ParseCPUMax(s)
		return c.Milli(), err
	case r == Memory && m == MethodCgroupV1:
		v, err := ReadInt(dir, name)
		if err != nil || v1MemoryUnlimited(v) {
			return 0, err
		}
		return v, nil
	default:
		s, err := ReadFile(dir, name)
		if err != nil {
			return 0, err
		}
		v, err := ParseMax(s)
		if err != nil {
			return 0, fmt.Errorf("parsing %s: %w", filepath.Join(dir, name), err)
		}
		return v, nil
	}
}

// SetLimit makes the limit of r in group dir under method m equal want (0:
// no limit), in the units of Limits. It writes only when what the group
// holds differs, then reads the limit back: got is what the kernel
// enforces now (memory rounded down to a page by the kernel), wrote says
// whether anything was written. CPU limits use CPUPeriod; a period changed
// behind marshal's back is restored.
//
// On a v1 hierarchy the kernel refuses (EINVAL) a CPU quota above the
// parent's, and a parent's quota below a child's.
func SetLimit(dir string, r Resource, m Method, want int64) (got int64, wrote bool, err error) {
	if want < 0 {
		return 0, false, fmt.Errorf("%s limit %d: want 0 (none) or a positive value", r, want)
	}
	switch {
	case r == CPU && m == MethodCgroupV1:
		wrote, err = setCFS(dir, CPUMaxFromMilli(want))
	case r == CPU && m == MethodCgroupV2:
		wrote, err = setCPUMax(dir, CPUMaxFromMilli(want))
	case r == Memory && (m == MethodCgroupV1 || m == MethodCgroupV2):
		v := FormatMax(want)
		if want == 0 && m == MethodCgroupV1 {
			v = "-1"
		}
		wrote, err = setIfDiffers(dir, r, m, v, func(cur int64) bool { return sameMemoryLimit(cur, want) })
	case r == PIDs && (m == MethodCgroupV1 || m == MethodCgroupV2):
		wrote, err = setIfDiffers(dir, r, m, FormatMax(want), func(cur int64) bool { return cur == want })
	default:
		return 0, false, fmt.Errorf("no %s limit file under method %q", r, m)
	}
	if err != nil {
		return 0, wrote, limitError(dir, r, want, err)
	}
	got, err = ReadLimit(dir, r, m)
	if err != nil {
		return 0, wrote, fmt.Errorf("reading back %s limit in %s: %w", r, dir, err)
	}
	return got, wrote, nil
}

// WriteLimit is SetLimit for a group just created, whose files hold the
// kernel's defaults: it writes want without reading first, then reads the
// limit back (and restores the CPU period should it not be CPUPeriod).
func WriteLimit(dir string, r Resource, m Method, want int64) (int64, error) {
	if want < 0 {
		return 0, fmt.Errorf("%s limit %d: want 0 (none) or a positive value", r, want)
	}
	var name, v string
	switch {
	case r == CPU && m == MethodCgroupV1:
		name, v = FileCFSQuota, "-1"
		if c := CPUMaxFromMilli(want); c.Quota != 0 {
			v = strconv.FormatInt(c.Quota, 10)
		}
	case r == CPU && m == MethodCgroupV2:
		name, v = FileCPUMax, CPUMaxFromMilli(want).String()
	case r == Memory && m == MethodCgroupV1 && want == 0:
		name, v = FileMemoryLimit, "-1"
	case (r == Memory || r == PIDs) && (m == MethodCgroupV1 || m == MethodCgroupV2):
		name, v = LimitFile(r, m), FormatMax(want)
	default:
		return 0, fmt.Errorf("no %s limit file under method %q", r, m)
	}
	if err := WriteFile(dir, name, v); err != nil {
		return 0, limitError(dir, r, want, err)
	}
	got, err := ReadLimit(dir, r, m)
	if err != nil {
		return 0, fmt.Errorf("reading back %s limit in %s: %w", r, dir, err)
	}
	if got != want && !(r == Memory && sameMemoryLimit(got, want)) {
		got, _, err = SetLimit(dir, r, m, want)
	}
	return got, err
}

func limitError(dir string, r Resource, want int64, err error) error {
	if r == CPU && errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("setting %s limit %d in %s (the kernel refuses a quota below 1 ms, and cgroup v1 one above the parent's or below a child's): %w", r, want, dir, err)
	}
	return fmt.Errorf("setting %s limit %d in %s: %w", r, want, dir, err)
}

// setIfDiffers writes v to r's limit file unless same says the current
// limit already is the one wanted.
func setIfDiffers(dir string, r Resource, m Method, v string, same func(cur int64) bool) (bool, error) {
	cur, err := ReadLimit(dir, r, m)
	if err != nil || same(cur) {
		return false, err
	}
	return true, WriteFile(dir, LimitFile(r, m), v)
}

func setCPUMax(dir string, want CPUMax) (bool, error) {
	s, err := ReadFile(dir, FileCPUMax)
	if err != nil {
		return false, err
	}
	cur, err := ParseCPUMax(s)
	if err != nil {
		return false, err
	}
	if cur.Equal(want) {
		return false, nil
	}
	v := want.String()
	if want.Quota == 0 {
		v = "max" // keeps the period, as "no limit" has none
	}
	return true, WriteFile(dir, FileCPUMax, v)
}

func setCFS(dir string, want CPUMax) (bool, error) {
	cur, err := readCFS(dir)
	if err != nil {
		return false, err
	}
	if cur.Equal(want) {
		return false, nil
	}
	quota := strconv.FormatInt(want.Quota, 10)
	if want.Quota == 0 {
		return true, WriteFile(dir, FileCFSQuota, "-1")
	}
	if cur.Period == want.Period {
		return true, WriteFile(dir, FileCFSQuota, quota)
	}
	// The kernel checks the quota/period ratio against parent and children
	// after each write, so the intermediate pair must pass too; one of the
	// two orders does whenever the final pair does.
	period := strconv.FormatInt(want.Period, 10)
	if err := WriteFile(dir, FileCFSQuota, quota); err == nil {
		return true, WriteFile(dir, FileCFSPeriod, period)
	}
	if err := WriteFile(dir, FileCFSPeriod, period); err != nil {
		return true, err
	}
	return true, WriteFile(dir, FileCFSQuota, quota)
}

// EnableControllers makes sure every controller in ctrls is enabled in the
// cgroup.subtree_control of v2 group dir, so that its children get the
// controllers' interface files. It writes only the missing ones, in one
// write, and reports whether it wrote. A controller that dir cannot enable
// (absent from its cgroup.controllers) is an error wrapping
// ErrUnavailable.
func EnableControllers(dir string, ctrls ...string) (bool, error) {
	enabled, err := ReadFile(dir, FileSubtreeControl)
	if err != nil {
		return false, fmt.Errorf("enabling controllers: %w", err)
	}
	have := strings.Fields(enabled)
	var missing []string
	for _, c := range ctrls {
		if !slices.Contains(have, c) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	avail, err := ReadFile(dir, FileControllers)
	if err != nil {
		return false, fmt.Errorf("enabling controllers: %w", err)
	}
	var plus []string
	for _, c := range missing {
		if !slices.Contains(strings.Fields(avail), c) {
			return false, fmt.Errorf("controller %s is not available in %s: %w", c, dir, ErrUnavailable)
		}
		plus = append(plus, "+"+c)
	}
	if err := WriteFile(dir, FileSubtreeControl, strings.Join(plus, " ")); err != nil {
		return true, fmt.Errorf("enabling controllers: %w", err)
	}
	return true, nil
}

// MoveProcess moves process pid, all its threads, into group dir (v1 or
// v2) by writing cgroup.procs. A process that is gone is an error wrapping
// ErrNoProcess; a missing group one wrapping ErrNotFound.
func MoveProcess(dir string, pid int) error {
	err := WriteFile(dir, FileProcs, strconv.Itoa(pid))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("moving pid %d into %s: %w", pid, dir, ErrNoProcess)
	}
	return fmt.Errorf("moving pid %d: %w", pid, err)
}

// ReadProcs returns the processes directly in group dir (not below it).
func ReadProcs(dir string) ([]int, error) {
	return readIDs(filepath.Join(dir, FileProcs))
}

func readIDs(path string) ([]int, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, notFound(err)
	}
	f := strings.Fields(string(b))
	ids := make([]int, 0, len(f))
	for _, s := range f {
		id, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// WalkGroups calls fn for group dir and every group below it, parents
// before children. Groups removed while walking are skipped.
func WalkGroups(dir string, fn func(group string) error) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		return fn(path)
	})
	return notFound(err)
}

// CountThreads counts the threads in v2 group dir and every group below
// it, from their cgroup.threads: the task count where no pids controller
// keeps one.
func CountThreads(dir string) (int64, error) {
	var n int64
	err := WalkGroups(dir, func(g string) error {
		ids, err := readIDs(filepath.Join(g, FileThreads))
		if errors.Is(err, ErrNotFound) && g != dir {
			return nil
		}
		n += int64(len(ids))
		return err
	})
	return n, err
}

// KillGroup kills every process in v2 group dir and below it by writing
// cgroup.kill, which the kernel applies to the whole subtree at once,
// including processes forked meanwhile. A missing group is an error
// wrapping ErrNotFound; a kernel without cgroup.kill one wrapping
// errors.ErrUnsupported.
func KillGroup(dir string) error {
	err := WriteFile(dir, FileKill, "1")
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return fmt.Errorf("killing %s: %w", dir, notFound(serr))
		}
		return fmt.Errorf("killing %s: no %s: %w", dir, FileKill, errors.ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("killing %s: %w", dir, err)
	}
	return nil
}

// FreezeGroup freezes (or thaws) v2 group dir and everything below it by
// writing cgroup.freeze. The freeze completes asynchronously: cgroup.events
// says "frozen 1" once every task is stopped. A kernel without
// cgroup.freeze is an error wrapping errors.ErrUnsupported.
func FreezeGroup(dir string, frozen bool) error {
	v := "0"
	if frozen {
		v = "1"
	}
	err := WriteFile(dir, FileFreeze, v)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return fmt.Errorf("freezing %s: %w", dir, notFound(serr))
		}
		return fmt.Errorf("freezing %s: no %s: %w", dir, FileFreeze, errors.ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("freezing %s: %w", dir, err)
	}
	return nil
}

// RemoveGroup removes the empty group dir (rmdir). A group that still holds
// processes or child groups is an error wrapping ErrBusy; a missing group
// is not an error.
func RemoveGroup(dir string) error {
	err := syscall.Rmdir(dir)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("removing %s: %w", dir, ErrBusy)
	}
	return fmt.Errorf("removing %s: %w", dir, err)
}

// notFound turns fs.ErrNotExist into ErrNotFound, keeping the message.
func notFound(err error) error {
	if err != nil && errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
