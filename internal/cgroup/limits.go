package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUPeriod is the CFS period marshal writes with every CPU limit: the
// kernel's default of 100 ms.
const CPUPeriod = 100 * time.Millisecond

// Controller returns the name of the kernel controller that limits r, the
// same in v1 and v2: "cpu", "memory" or "pids".
func Controller(r Resource) string {
	return string(r)
}

// limitFormat is how a group's interface files hold one resource's limit
// under one method, in the units of Limits.
type limitFormat struct {
	// file holds the limit.
	file string
	// read returns the limit in force, 0 for none.
	read func(dir string) (int64, error)
	// text is what file is written with for a limit of want (0: none).
	text func(want int64) string
	// set, when not nil, writes want unless the group holds it already,
	// in place of writing text: the CPU period sits beside its quota.
	set func(fsys FS, dir string, want int64) (bool, error)
}

// limitFormats is every limit file marshal writes, per method and
// resource.
var limitFormats = map[Method]PerResource[limitFormat]{
	MethodCgroupV2: {
		CPU:    limitFormat{file: FileCPUMax, read: readCPUMax, text: cpuMaxText, set: setCPUMax},
		Memory: limitFormat{file: FileMemoryMax, read: maxReader(FileMemoryMax), text: FormatMax},
		PIDs:   limitFormat{file: FilePIDsMax, read: maxReader(FilePIDsMax), text: FormatMax},
	},
	MethodCgroupV1: {
		CPU:    limitFormat{file: FileCFSQuota, read: readCFSMilli, text: cfsQuotaText, set: setCFS},
		Memory: limitFormat{file: FileMemoryLimit, read: readV1Memory, text: v1MemoryText},
		PIDs:   limitFormat{file: FilePIDsMax, read: maxReader(FilePIDsMax), text: FormatMax},
	},
}

// formatOf returns how r's limit is held under method m, and an error
// when m holds no limit of r.
func formatOf(r Resource, m Method) (limitFormat, error) {
	f := limitFormats[m].Get(r)
	if f.file == "" {
		return limitFormat{}, fmt.Errorf("no %s limit file under method %q", r, m)
	}
	return f, nil
}

// sameLimit tells, per resource, whether a limit read back is the one
// written.
var sameLimit = PerResource[func(got, want int64) bool]{
	CPU:    func(got, want int64) bool { return got == want },
	Memory: sameMemoryLimit,
	PIDs:   func(got, want int64) bool { return got == want },
}

// SameLimit reports whether got, read back, is the limit want of r: the
// kernel rounds a memory limit down to a whole page; every other limit
// reads back exactly.
func SameLimit(r Resource, want, got int64) bool {
	if same := sameLimit.Get(r); same != nil {
		return same(got, want)
	}
	return got == want
}

// LimitFile returns the interface file that holds r's limit under method
// m: cpu.max, memory.max, pids.max for cgroup_v2; cpu.cfs_quota_us (with
// cpu.cfs_period_us beside it), memory.limit_in_bytes, pids.max for
// cgroup_v1. It returns "" for any other method.
func LimitFile(r Resource, m Method) string {
	return limitFormats[m].Get(r).file
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

func readCFSMilli(dir string) (int64, error) {
	c, err := readCFS(dir)
	return c.Milli(), err
}

func readCPUMax(dir string) (int64, error) {
	s, err := ReadFile(dir, FileCPUMax)
	if err != nil {
		return 0, err
	}
	c, err := ParseCPUMax(s)
	return c.Milli(), err
}

func readV1Memory(dir string) (int64, error) {
	v, err := ReadInt(dir, FileMemoryLimit)
	if err != nil || v1MemoryUnlimited(v) {
		return 0, err
	}
	return v, nil
}

// maxReader reads a file holding a count or "max".
func maxReader(name string) func(dir string) (int64, error) {
	return func(dir string) (int64, error) {
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

func cpuMaxText(milli int64) string { return CPUMaxFromMilli(milli).String() }

func cfsQuotaText(milli int64) string {
	if c := CPUMaxFromMilli(milli); c.Quota != 0 {
		return strconv.FormatInt(c.Quota, 10)
	}
	return "-1"
}

func v1MemoryText(want int64) string {
	if want == 0 {
		return "-1"
	}
	return FormatMax(want)
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
	f, err := formatOf(r, m)
	if err != nil {
		return 0, err
	}
	return f.read(dir)
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
func SetLimit(fsys FS, dir string, r Resource, m Method, want int64) (got int64, wrote bool, err error) {
	if want < 0 {
		return 0, false, fmt.Errorf("%s limit %d: want 0 (none) or a positive value", r, want)
	}
	f, err := formatOf(r, m)
	if err != nil {
		return 0, false, err
	}
	if f.set != nil {
		wrote, err = f.set(fsys, dir, want)
	} else {
		wrote, err = setIfDiffers(fsys, dir, r, f, want)
	}
	if err != nil {
		return 0, wrote, limitError(dir, r, want, err)
	}
	got, err = f.read(dir)
	if err != nil {
		return 0, wrote, fmt.Errorf("reading back %s limit in %s: %w", r, dir, err)
	}
	return got, wrote, nil
}

// WriteLimit is SetLimit for a group just created, whose files hold the
// kernel's defaults: it writes want without reading first, then reads the
// limit back (and restores the CPU period should it not be CPUPeriod).
func WriteLimit(fsys FS, dir string, r Resource, m Method, want int64) (int64, error) {
	if want < 0 {
		return 0, fmt.Errorf("%s limit %d: want 0 (none) or a positive value", r, want)
	}
	f, err := formatOf(r, m)
	if err != nil {
		return 0, err
	}
	if err := fsys.WriteFile(dir, f.file, f.text(want)); err != nil {
		return 0, limitError(dir, r, want, err)
	}
	got, err := f.read(dir)
	if err != nil {
		return 0, fmt.Errorf("reading back %s limit in %s: %w", r, dir, err)
	}
	if !SameLimit(r, want, got) {
		got, _, err = SetLimit(fsys, dir, r, m, want)
	}
	return got, err
}

func limitError(dir string, r Resource, want int64, err error) error {
	if r == CPU && errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("setting %s limit %d in %s (the kernel refuses a quota below 1 ms, and cgroup v1 one above the parent's or below a child's): %w", r, want, dir, err)
	}
	return fmt.Errorf("setting %s limit %d in %s: %w", r, want, dir, err)
}

// setIfDiffers writes want to r's limit file as f holds it, unless the
// limit in force already is want.
func setIfDiffers(fsys FS, dir string, r Resource, f limitFormat, want int64) (bool, error) {
	cur, err := f.read(dir)
	if err != nil || SameLimit(r, want, cur) {
		return false, err
	}
	return true, fsys.WriteFile(dir, f.file, f.text(want))
}

func setCPUMax(fsys FS, dir string, milli int64) (bool, error) {
	want := CPUMaxFromMilli(milli)
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
	return true, fsys.WriteFile(dir, FileCPUMax, v)
}

func setCFS(fsys FS, dir string, milli int64) (bool, error) {
	want := CPUMaxFromMilli(milli)
	cur, err := readCFS(dir)
	if err != nil {
		return false, err
	}
	if cur.Equal(want) {
		return false, nil
	}
	quota := strconv.FormatInt(want.Quota, 10)
	if want.Quota == 0 {
		return true, fsys.WriteFile(dir, FileCFSQuota, "-1")
	}
	if cur.Period == want.Period {
		return true, fsys.WriteFile(dir, FileCFSQuota, quota)
	}
	// The kernel checks the quota/period ratio against parent and children
	// after each write, so the intermediate pair must pass too; one of the
	// two orders does whenever the final pair does.
	period := strconv.FormatInt(want.Period, 10)
	if err := fsys.WriteFile(dir, FileCFSQuota, quota); err == nil {
		return true, fsys.WriteFile(dir, FileCFSPeriod, period)
	}
	if err := fsys.WriteFile(dir, FileCFSPeriod, period); err != nil {
		return true, err
	}
	return true, fsys.WriteFile(dir, FileCFSQuota, quota)
}

// EnableControllers makes sure every controller in ctrls is enabled in the
// cgroup.subtree_control of v2 group dir, so that its children get the
// controllers' interface files. It writes only the missing ones, in one
// write, and reports whether it wrote. A controller that dir cannot enable
// (absent from its cgroup.controllers) is an error wrapping
// ErrUnavailable.
func EnableControllers(fsys FS, dir string, ctrls ...string) (bool, error) {
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
	if err := fsys.WriteFile(dir, FileSubtreeControl, strings.Join(plus, " ")); err != nil {
		return true, fmt.Errorf("enabling controllers: %w", err)
	}
	return true, nil
}
