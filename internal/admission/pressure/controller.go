package pressure

import (
	"fmt"
	"sync"
	"time"
)

// Level is how much of the work capacity new reservations may use.
type Level string

const (
	// Normal: the whole work capacity.
	Normal Level = "normal"
	// Constrained: half of it.
	Constrained Level = "constrained"
	// Critical: nothing new is admitted.
	Critical Level = "critical"
)

// Reason says why the level is what it is. Reasons are enumerations so
// that they can be shown to people and exported as metric labels.
type Reason string

const (
	// ReasonNone: every signal is clear.
	ReasonNone Reason = "none"
	// ReasonNotSampled: no valid sample has been taken yet.
	ReasonNotSampled Reason = "not_sampled"
	// ReasonStale: the last valid sample is too old.
	ReasonStale Reason = "sample_stale"
	// ReasonSamplingFailed: reading the host's signals failed.
	ReasonSamplingFailed Reason = "sampling_failed"
	// ReasonInvalidSample: a sample was stale, replayed or impossible.
	ReasonInvalidSample Reason = "invalid_sample"
	// ReasonStopped: the monitor that feeds the controller stopped.
	ReasonStopped Reason = "monitor_stopped"
	// ReasonMemoryAvailable: MemAvailable is low.
	ReasonMemoryAvailable Reason = "memory_available"
	// ReasonMemoryStall: tasks stall on memory (PSI memory full).
	ReasonMemoryStall Reason = "memory_stall"
	// ReasonCPUStall: runnable tasks wait for a CPU (PSI cpu some).
	ReasonCPUStall Reason = "cpu_stall"
	// ReasonDiskFree: the state directory's file system is nearly full.
	ReasonDiskFree Reason = "disk_free"
	// ReasonControlLag: the monitor itself woke late.
	ReasonControlLag Reason = "control_lag"
	// ReasonRecovering: signals are clear, and the level steps down once
	// they have stayed clear for a recovery step.
	ReasonRecovering Reason = "recovering"
	// ReasonNotMonitored: marshald was told not to monitor pressure
	// (--pressure=off); the level is always normal.
	ReasonNotMonitored Reason = "not_monitored"
)

// Thresholds of the contract. PSI values are basis points of the avg10
// percentage (2.00% = 200).
const (
	// RecoveryStep is how long signals must stay clear, without a gap in
	// sampling, for the level to step down once.
	RecoveryStep = 30 * time.Second
	// DefaultValidFor is how long a sample stays current when it does not
	// say: three 2-second sampling intervals.
	DefaultValidFor = 6 * time.Second
	// MaxSampleAge is how old a sample may be when it is observed.
	MaxSampleAge = 2 * time.Second

	memoryFullConstrainedBP = 200
	memoryFullCriticalBP    = 1000
	memoryFullClearBP       = 100
	cpuSomeConstrainedBP    = 8000
	cpuSomeClearBP          = 5000
	lagConstrained          = 200 * time.Millisecond
	lagCritical             = time.Second
	lagClear                = 100 * time.Millisecond

	gib = int64(1) << 30
)

// Sample is one reading of the host's signals.
type Sample struct {
	// At is when the reading completed.
	At time.Time
	// ValidFor is how long the sample stays current: the monitor sets it
	// to three of its current sampling intervals. Zero means
	// DefaultValidFor.
	ValidFor time.Duration
	// MemoryFullBP is PSI memory "full" avg10 in basis points.
	MemoryFullBP int
	// CPUSomeBP is PSI cpu "some" avg10 in basis points.
	CPUSomeBP int
	// MemTotal and MemAvailable are /proc/meminfo's, in bytes.
	MemTotal, MemAvailable int64
	// DiskCapacity and DiskAvailable are the state directory's file
	// system size and the bytes available to unprivileged users.
	DiskCapacity, DiskAvailable int64
	// ControlLag is how late the monitor woke for this sample.
	ControlLag time.Duration
}

func (s Sample) validFor() time.Duration {
	if s.ValidFor > 0 {
		return s.ValidFor
	}
	return DefaultValidFor
}

// Disk watermarks. DevGuard's are critical at or below max(5%, 2 GiB)
// available and clear above max(10%, 4 GiB), which on a file system of
// 2 GiB or less can never clear: a small state disk (a tmpfs, a small
// partition) would never admit anything. The absolute floors are capped
// at a quarter and a half of the file system, so a file system of 8 GiB
// or more keeps DevGuard's watermarks exactly and a smaller one keeps a
// quarter free (critical) and a half free (clear): 25 MiB and 50 MiB of
// a 100 MiB tmpfs.
func diskCritical(capacity int64) int64 { return max(capacity/20, min(2*gib, capacity/4)) }
func diskClear(capacity int64) int64    { return max(capacity/10, min(4*gib, capacity/2)) }

// Memory levels from MemAvailable, Linux's counterpart of the macOS
// memory-pressure level DevGuard reads: warning at or below 10% of
// MemTotal, critical at or below 5%.
func (s Sample) memoryCritical() bool { return s.MemAvailable <= s.MemTotal/20 }
func (s Sample) memoryWarning() bool  { return s.MemAvailable <= s.MemTotal/10 }

func (s Sample) invalid() bool {
	return s.DiskCapacity <= 0 || s.DiskAvailable < 0 || s.DiskAvailable > s.DiskCapacity ||
		s.MemTotal <= 0 || s.MemAvailable < 0 || s.MemAvailable > s.MemTotal ||
		s.MemoryFullBP < 0 || s.MemoryFullBP > 10000 || s.CPUSomeBP < 0 || s.CPUSomeBP > 10000 ||
		s.ControlLag < 0
}

// criticalNow closes admission on a single sample.
func (s Sample) criticalNow() Reason {
	switch {
	case s.memoryCritical():
		return ReasonMemoryAvailable
	case s.DiskAvailable <= diskCritical(s.DiskCapacity):
		return ReasonDiskFree
	}
	return ""
}

// criticalRepeated closes admission when seen in two consecutive samples.
func (s Sample) criticalRepeated() Reason {
	switch {
	case s.MemoryFullBP >= memoryFullCriticalBP:
		return ReasonMemoryStall
	case s.ControlLag >= lagCritical:
		return ReasonControlLag
	}
	return ""
}

// constrained halves the target when seen in two consecutive samples.
// CPU contention never closes admission by itself: reservations are
// accounting, and a busy CPU slows work down rather than failing it.
func (s Sample) constrained() Reason {
	switch {
	case s.MemoryFullBP >= memoryFullConstrainedBP:
		return ReasonMemoryStall
	case s.memoryWarning():
		return ReasonMemoryAvailable
	case s.ControlLag >= lagConstrained:
		return ReasonControlLag
	case s.CPUSomeBP >= cpuSomeConstrainedBP:
		return ReasonCPUStall
	}
	return ""
}

// clear is the condition for recovery; between constrained and clear is
// a band that neither raises nor lowers the level.
func (s Sample) clear() bool {
	return s.calm() && s.CPUSomeBP < cpuSomeClearBP
}

// calm is clear but for CPU contention: the condition for leaving
// critical, and for a first sample to open admission. CPU contention only
// ever halves the target, so a busy CPU neither keeps admission closed
// at start-up nor holds it closed after a critical signal has cleared;
// on a host that is always busy (a CI runner) it would otherwise never
// open.
func (s Sample) calm() bool {
	return !s.memoryWarning() && s.MemoryFullBP < memoryFullClearBP &&
		s.ControlLag < lagClear && s.DiskAvailable > diskClear(s.DiskCapacity)
}

// onlyCPU reports whether CPU contention is the one signal that
// constrains s.
func (s Sample) onlyCPU() bool {
	t := s
	t.CPUSomeBP = 0
	return s.constrained() == ReasonCPUStall && t.constrained() == "" && t.criticalRepeated() == ""
}

// cause names the strongest signal that is not clear, or "".
func (s Sample) cause() Reason {
	for _, r := range []Reason{s.criticalNow(), s.criticalRepeated(), s.constrained()} {
		if r != "" {
			return r
		}
	}
	switch {
	case s.DiskAvailable <= diskClear(s.DiskCapacity):
		return ReasonDiskFree
	case s.MemoryFullBP >= memoryFullClearBP:
		return ReasonMemoryStall
	case s.CPUSomeBP >= cpuSomeClearBP:
		return ReasonCPUStall
	case s.ControlLag >= lagClear:
		return ReasonControlLag
	}
	return ""
}

// Status is the level in force and why.
type Status struct {
	Level  Level  `json:"level"`
	Reason Reason `json:"reason"`
	// Since is when the level last changed; zero before the first sample.
	Since time.Time `json:"since,omitzero"`
	// MemAvailable and DiskAvailable are the last valid sample's, in
	// bytes (zero before the first), so that a reason can say how much
	// is left.
	MemAvailable  int64 `json:"mem_available,omitempty"`
	DiskAvailable int64 `json:"disk_available,omitempty"`
}

// Cause says in a few words, built from the reason and the sampled
// amounts alone, why the level is what it is: "cpu pressure", "state disk
// nearly full: 3 MiB free".
func (s Status) Cause() string {
	switch s.Reason {
	case ReasonNone:
		return "no pressure"
	case ReasonNotSampled:
		return "pressure not sampled yet"
	case ReasonStale:
		return "pressure sample stale"
	case ReasonSamplingFailed:
		return "pressure sampling failed"
	case ReasonInvalidSample:
		return "invalid pressure sample"
	case ReasonStopped:
		return "pressure monitor stopped"
	case ReasonMemoryAvailable:
		return "memory low: " + mib(s.MemAvailable) + " available"
	case ReasonMemoryStall:
		return "memory pressure"
	case ReasonCPUStall:
		return "cpu pressure"
	case ReasonDiskFree:
		return "state disk nearly full: " + mib(s.DiskAvailable) + " free"
	case ReasonControlLag:
		return "pressure monitor lagging"
	case ReasonRecovering:
		return "recovering from pressure"
	case ReasonNotMonitored:
		return "pressure not monitored"
	}
	return string(s.Reason)
}

// mib formats bytes in whole MiB, or in bytes below one.
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// Controller holds the pressure level with DevGuard's hysteresis. It is
// safe for concurrent use.
type Controller struct {
	// mu guards the fields that follow.
	mu         sync.Mutex
	level      Level
	reason     Reason
	since      time.Time
	last       *Sample // last valid sample
	softCount  int
	hardCount  int
	clearSince time.Time // zero: not accumulating a recovery step
}

// NewController returns a controller that starts closed: critical until
// the first valid, healthy sample.
func NewController() *Controller {
	return &Controller{level: Critical, reason: ReasonNotSampled}
}

func (c *Controller) setLocked(l Level, r Reason, at time.Time) {
	if l != c.level {
		c.since = at
	}
	c.level, c.reason = l, r
}

// closeLocked closes admission and restarts every count, as a failed or
// missing observation does.
func (c *Controller) closeLocked(r Reason, at time.Time) {
	c.setLocked(Critical, r, at)
	c.clearSince = time.Time{}
	c.softCount, c.hardCount = 0, 0
}

// staleLocked applies the freshness rule: without a current sample the
// controller is critical.
func (c *Controller) staleLocked(now time.Time) {
	if c.last == nil {
		if c.level != Critical {
			c.closeLocked(ReasonNotSampled, now)
		}
		return
	}
	// The last sample is kept: a sample after the gap is not a first
	// sample, so reopening needs the ordinary recovery steps.
	if now.Sub(c.last.At) > c.last.validFor() && (c.level != Critical || c.reason != ReasonStale) {
		c.closeLocked(ReasonStale, now)
	}
}

// Status returns the level in force at now.
func (c *Controller) Status(now time.Time) Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.staleLocked(now)
	return c.statusLocked()
}

func (c *Controller) statusLocked() Status {
	st := Status{Level: c.level, Reason: c.reason, Since: c.since}
	if c.last != nil {
		st.MemAvailable, st.DiskAvailable = c.last.MemAvailable, c.last.DiskAvailable
	}
	return st
}

// Failed records that a reading of the host failed or was incomplete:
// admission closes at once, and recovery needs the ordinary clear steps.
func (c *Controller) Failed(now time.Time, r Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(r, now)
}

// Observe applies a sample taken at s.At, judged at now, and returns the
// resulting status. An invalid, stale, future or replayed sample closes
// admission and returns ErrInvalidSample.
func (c *Controller) Observe(s Sample, now time.Time) (Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	age := now.Sub(s.At)
	if age < 0 || age > MaxSampleAge || s.invalid() {
		c.setLocked(Critical, ReasonInvalidSample, now)
		c.clearSince = time.Time{}
		return c.statusLocked(),
			fmt.Errorf("sample at %s judged at %s: %w", s.At.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), ErrInvalidSample)
	}
	if c.last != nil {
		if !s.At.After(c.last.At) {
			c.setLocked(Critical, ReasonInvalidSample, now)
			c.clearSince = time.Time{}
			return c.statusLocked(),
				fmt.Errorf("sample at %s is not after the previous one: %w", s.At.Format(time.RFC3339Nano), ErrInvalidSample)
		}
		// A gap in sampling is not a recovery interval.
		if s.At.Sub(c.last.At) > c.last.validFor() {
			c.closeLocked(ReasonStale, s.At)
		}
	} else if s.criticalNow() == "" && s.criticalRepeated() == "" {
		// The first valid sample without a critical signal opens
		// admission: whole when healthy, half when CPU contention is
		// all that constrains it. Any other soft signal keeps it closed
		// until the ordinary recovery step.
		switch {
		case s.constrained() == "":
			c.setLocked(Normal, ReasonNone, s.At)
		case s.onlyCPU():
			c.setLocked(Constrained, ReasonCPUStall, s.At)
		}
	}
	sc := s
	c.last = &sc
	if s.constrained() != "" {
		c.softCount++
	} else {
		c.softCount = 0
	}
	if s.criticalRepeated() != "" {
		c.hardCount++
	} else {
		c.hardCount = 0
	}
	cause := s.cause()
	switch {
	case s.criticalNow() != "" || c.hardCount >= 2:
		c.setLocked(Critical, cause, s.At)
		c.clearSince = time.Time{}
	case c.level == Critical:
		// Leaving critical takes a recovery step of calm samples: CPU
		// contention alone does not hold admission closed.
		if !s.calm() {
			c.clearSince = time.Time{}
			if cause != "" {
				c.reason = cause
			}
			break
		}
		c.recoverLocked(s.At)
	case c.softCount >= 2:
		if c.level == Normal {
			c.setLocked(Constrained, cause, s.At)
		} else {
			c.reason = cause
		}
		c.clearSince = time.Time{}
	case s.clear():
		c.recoverLocked(s.At)
	default:
		c.clearSince = time.Time{}
		if c.level != Normal && cause != "" {
			c.reason = cause
		}
	}
	return c.statusLocked(), nil
}

// recoverLocked counts a sample at that allows recovery: once they have
// lasted a recovery step without a gap, the level steps down once.
func (c *Controller) recoverLocked(at time.Time) {
	if c.clearSince.IsZero() {
		c.clearSince = at
	}
	if at.Sub(c.clearSince) >= RecoveryStep {
		switch c.level {
		case Critical:
			c.setLocked(Constrained, ReasonRecovering, at)
		default:
			c.setLocked(Normal, ReasonNone, at)
		}
		c.clearSince = at
	}
	if c.level != Normal {
		c.reason = ReasonRecovering
	}
}

// Settled reports whether the controller is normal and its last sample
// was clear: nothing awaits a second sample or a recovery step, so the
// monitor may sample slowly.
func (c *Controller) Settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.level == Normal && c.last != nil && c.softCount == 0 && c.hardCount == 0
}

// Fixed is a pressure source that always reports one status, for hosts
// where pressure is not monitored.
type Fixed Status

// Status returns f.
func (f Fixed) Status(time.Time) Status { return Status(f) }

// NotMonitored is the source of a daemon told not to monitor pressure:
// always normal, so the target is the whole work capacity.
var NotMonitored = Fixed{Level: Normal, Reason: ReasonNotMonitored}
