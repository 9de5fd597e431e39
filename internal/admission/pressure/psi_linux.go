package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Where PSI lives: the system-wide files, and the same files at the root
// of the cgroup2 hierarchy, which some kernels accept triggers on when
// they refuse them on /proc/pressure.
const procPressure = "/proc/pressure"

// psiFiles returns the candidate files for resource ("memory", "cpu"), in
// order of preference.
func psiFiles(resource, cgroup2 string) []string {
	files := []string{filepath.Join(procPressure, resource)}
	if cgroup2 != "" {
		files = append(files, filepath.Join(cgroup2, resource+".pressure"))
	}
	return files
}

// HostSampler reads Linux's signals: PSI memory and cpu, /proc/meminfo
// and statfs of the state directory.
type HostSampler struct {
	// StateDir is the directory whose file system's free space counts.
	StateDir string
	// MemoryPSI and CPUPSI are the PSI files read; empty when the kernel
	// has no PSI (booted with psi=0), in which case those signals read
	// as zero, as DevGuard treats a host without Linux PSI.
	MemoryPSI, CPUPSI string
	// Meminfo is /proc/meminfo; a test may point it elsewhere.
	Meminfo string
}

// NewHostSampler finds the PSI files (cgroup2 is the cgroup2 mount, or
// empty) and returns a sampler for stateDir.
func NewHostSampler(stateDir, cgroup2 string) *HostSampler {
	h := &HostSampler{StateDir: stateDir, Meminfo: "/proc/meminfo"}
	for _, f := range psiFiles("memory", cgroup2) {
		if _, err := os.Stat(f); err == nil {
			h.MemoryPSI = f
			break
		}
	}
	for _, f := range psiFiles("cpu", cgroup2) {
		if _, err := os.Stat(f); err == nil {
			h.CPUPSI = f
			break
		}
	}
	return h
}

// Sample implements Sampler.
func (h *HostSampler) Sample(ctx context.Context) (Sample, error) {
	var s Sample
	if err := ctx.Err(); err != nil {
		return s, err
	}
	if h.MemoryPSI != "" {
		_, full, err := readPSI(h.MemoryPSI)
		if err != nil {
			return s, err
		}
		s.MemoryFullBP = full
	}
	if h.CPUPSI != "" {
		some, _, err := readPSI(h.CPUPSI)
		if err != nil {
			return s, err
		}
		s.CPUSomeBP = some
	}
	var err error
	if s.MemTotal, s.MemAvailable, err = readMeminfo(h.Meminfo); err != nil {
		return s, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(h.StateDir, &st); err != nil {
		return s, fmt.Errorf("statfs %s: %w: %w", h.StateDir, ErrNoSignal, err)
	}
	s.DiskCapacity = int64(st.Blocks) * st.Bsize
	s.DiskAvailable = int64(st.Bavail) * st.Bsize
	return s, nil
}

func readPSI(path string) (some, full int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s: %w: %w", path, ErrNoSignal, err)
	}
	some, full, err = ParsePSI(data)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return some, full, nil
}

func readMeminfo(path string) (total, available int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s: %w: %w", path, ErrNoSignal, err)
	}
	total, available, err = ParseMeminfo(data)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return total, available, nil
}

// NewHostMonitor returns the monitor of this host for the state directory
// stateDir (cgroup2 is the cgroup2 mount, or empty; onLevel as
// MonitorConfig.OnLevel): woken by PSI
// triggers where the kernel accepts them, on its timer alone where it
// does not (EventDriven says which).
func NewHostMonitor(stateDir, cgroup2 string, onLevel func(from, to Status)) *Monitor {
	cfg := MonitorConfig{Sampler: NewHostSampler(stateDir, cgroup2), OnLevel: onLevel}
	tr, err := OpenTriggers(DefaultTriggerSpecs(cgroup2))
	if err == nil {
		cfg.Triggers = tr
	}
	m := NewMonitor(cfg)
	if tr != nil {
		m.closer = tr
	}
	return m
}

// TriggerSpec is one PSI trigger: the stall of Kind ("some" or "full")
// that, within Window, lasting Threshold in all, wakes the monitor.
type TriggerSpec struct {
	// Files are the candidate PSI files, tried in order until the kernel
	// accepts the trigger on one.
	Files             []string
	Kind              string
	Threshold, Window int64 // microseconds
}

func (t TriggerSpec) String() string {
	return fmt.Sprintf("%s %d %d", t.Kind, t.Threshold, t.Window)
}

// DefaultTriggerSpecs are the triggers the daemon sets: a memory stall of
// 7.5% of a 2 s window (earlier than the 2% avg10 "full" threshold takes
// to build up), and cpu contention of 80% of a 2 s window, the constrained
// threshold. The window is 2 s because unprivileged triggers need a
// multiple of 2 s and some kernels refuse shorter ones outright.
func DefaultTriggerSpecs(cgroup2 string) []TriggerSpec {
	return []TriggerSpec{
		{Files: psiFiles("memory", cgroup2), Kind: "some", Threshold: 150_000, Window: 2_000_000},
		{Files: psiFiles("cpu", cgroup2), Kind: "some", Threshold: 1_600_000, Window: 2_000_000},
	}
}

// PSITriggers holds registered PSI triggers and polls them for POLLPRI.
type PSITriggers struct {
	files []*os.File
	// Accepted names the file each registered trigger is on.
	Accepted []string
}

// OpenTriggers registers every spec on the first of its files that
// accepts it. Specs no file accepts are skipped; when none is accepted it
// returns ErrTriggersUnsupported. The caller must Close the triggers.
func OpenTriggers(specs []TriggerSpec) (*PSITriggers, error) {
	t := &PSITriggers{}
	var errs []error
	for _, spec := range specs {
		for _, path := range spec.Files {
			f, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			// The trigger string is written with its terminating NUL, as
			// the kernel documentation's example does.
			if _, err := f.Write(append([]byte(spec.String()), 0)); err != nil {
				f.Close()
				errs = append(errs, fmt.Errorf("trigger %q on %s: %w", spec.String(), path, err))
				continue
			}
			t.files = append(t.files, f)
			t.Accepted = append(t.Accepted, path)
			break
		}
	}
	if len(t.files) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrTriggersUnsupported, errors.Join(errs...))
	}
	return t, nil
}

// Close unregisters the triggers.
func (t *PSITriggers) Close() error {
	var errs []error
	for _, f := range t.files {
		errs = append(errs, f.Close())
	}
	t.files = nil
	return errors.Join(errs...)
}

// Run implements Triggers: it polls the trigger files for POLLPRI, with an
// eventfd that ends the poll when ctx ends.
func (t *PSITriggers) Run(ctx context.Context, wake chan<- struct{}) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	defer unix.Close(efd)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			var one [8]byte
			one[0] = 1 // eventfd counters are host-endian; any non-zero value wakes
			unix.Write(efd, one[:])
		case <-done:
		}
	}()
	defer func() {
		close(done)
		wg.Wait()
	}()
	fds := make([]unix.PollFd, 0, len(t.files)+1)
	for _, f := range t.files {
		fds = append(fds, unix.PollFd{Fd: int32(f.Fd()), Events: unix.POLLPRI})
	}
	fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("polling PSI triggers: %w", err)
		}
		if fds[len(fds)-1].Revents&unix.POLLIN != 0 {
			return nil
		}
		for i := range fds[:len(fds)-1] {
			ev := fds[i].Revents
			if ev&unix.POLLERR != 0 {
				// The trigger's group was removed: it will never fire again.
				return fmt.Errorf("PSI trigger on %s: %w", t.Accepted[i], unix.ENODEV)
			}
			if ev&unix.POLLPRI != 0 {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

var _ Triggers = (*PSITriggers)(nil)
var _ Sampler = (*HostSampler)(nil)
