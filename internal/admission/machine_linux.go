package admission

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/admission/pressure"
)

// MeasureMachine reads this host's CPUs (the ones this process may run
// on), MemTotal and task limit.
func MeasureMachine() (Machine, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return Machine{}, fmt.Errorf("reading CPU affinity: %w", err)
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return Machine{}, fmt.Errorf("reading meminfo: %w", err)
	}
	total, _, err := pressure.ParseMeminfo(meminfo)
	if err != nil {
		return Machine{}, err
	}
	tasks := int64(-1)
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		data, err := os.ReadFile(f)
		if err != nil {
			return Machine{}, fmt.Errorf("reading %s: %w", f, err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || n <= 0 {
			return Machine{}, fmt.Errorf("%s: %q is not a count", f, data)
		}
		if tasks < 0 || n < tasks {
			tasks = n
		}
	}
	return Machine{CPUMilli: int64(set.Count()) * 1000, MemoryBytes: total, Tasks: tasks}, nil
}

// bootUptime is the time since boot, counting time suspended
// (CLOCK_BOOTTIME), as DevGuard counts its monotonic milliseconds.
func bootUptime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// CLOCK_BOOTTIME exists on every kernel marshal runs on.
		panic(fmt.Sprintf("reading CLOCK_BOOTTIME: %v", err))
	}
	return time.Duration(ts.Nano())
}
