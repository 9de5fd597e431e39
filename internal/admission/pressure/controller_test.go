package pressure

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// sample is DevGuard's healthy sample, in Linux terms.
func sample(ms int) Sample {
	return Sample{At: at(ms), MemTotal: 32 * gib, MemAvailable: 20 * gib, DiskCapacity: 100 * gib, DiskAvailable: 40 * gib}
}

func observe(t *testing.T, c *Controller, s Sample) Level {
	t.Helper()
	st, err := c.Observe(s, s.At)
	if err != nil {
		t.Fatalf("Observe(%v) = %v", s.At, err)
	}
	return st.Level
}

// DevGuard: startup_and_missing_measurements_are_fail_closed.
func TestStartsClosedAndClosesWhenSamplesStop(t *testing.T) {
	c := NewController()
	if st := c.Status(at(0)); st.Level != Critical || st.Reason != ReasonNotSampled {
		t.Fatalf("before any sample = %+v, want critical, not_sampled", st)
	}
	if l := observe(t, c, sample(0)); l != Normal {
		t.Fatalf("first healthy sample = %s, want normal", l)
	}
	if st := c.Status(at(6000)); st.Level != Normal {
		t.Fatalf("6 s after = %s, want normal", st.Level)
	}
	if st := c.Status(at(6001)); st.Level != Critical || st.Reason != ReasonStale {
		t.Fatalf("6.001 s after = %+v, want critical, sample_stale", st)
	}
}

// A sample says how long it stays current: the monitor's slow cadence.
func TestSampleValidForSetsWhenItGoesStale(t *testing.T) {
	c := NewController()
	s := sample(0)
	s.ValidFor = 14 * time.Second
	observe(t, c, s)
	if st := c.Status(at(14000)); st.Level != Normal {
		t.Fatalf("14 s after = %s, want normal", st.Level)
	}
	if st := c.Status(at(14001)); st.Level != Critical {
		t.Fatalf("14.001 s after = %s, want critical", st.Level)
	}
}

// DevGuard: soft_pressure_requires_two_observations_but_critical_memory_is_immediate.
func TestSoftSignalsNeedTwoSamplesButCriticalMemoryIsImmediate(t *testing.T) {
	c := NewController()
	observe(t, c, sample(0))
	warn := func(ms int) Sample { s := sample(ms); s.MemAvailable = 3 * gib; return s }
	if l := observe(t, c, warn(2000)); l != Normal {
		t.Fatalf("one warning = %s, want normal", l)
	}
	if l := observe(t, c, warn(4000)); l != Constrained {
		t.Fatalf("two warnings = %s, want constrained", l)
	}
	crit := sample(6000)
	crit.MemAvailable = gib
	st, _ := c.Observe(crit, crit.At)
	if st.Level != Critical || st.Reason != ReasonMemoryAvailable {
		t.Fatalf("critical memory = %+v, want critical, memory_available", st)
	}
}

// Each soft signal, twice, constrains; with its reason.
func TestEachSoftSignalConstrainsWithItsReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Sample)
		reason Reason
	}{
		{"memory_full_psi", func(s *Sample) { s.MemoryFullBP = 200 }, ReasonMemoryStall},
		{"cpu_some_psi", func(s *Sample) { s.CPUSomeBP = 8000 }, ReasonCPUStall},
		{"control_lag", func(s *Sample) { s.ControlLag = 200 * time.Millisecond }, ReasonControlLag},
		{"memory_available", func(s *Sample) { s.MemAvailable = s.MemTotal / 10 }, ReasonMemoryAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewController()
			observe(t, c, sample(0))
			for _, ms := range []int{2000, 4000} {
				s := sample(ms)
				tc.change(&s)
				observe(t, c, s)
			}
			if st := c.Status(at(4000)); st.Level != Constrained || st.Reason != tc.reason {
				t.Fatalf("status = %+v, want constrained, %s", st, tc.reason)
			}
		})
	}
}

// CPU contention alone never closes admission.
func TestCPUStallAloneNeverGoesCritical(t *testing.T) {
	c := NewController()
	observe(t, c, sample(0))
	for ms := 2000; ms <= 20000; ms += 2000 {
		s := sample(ms)
		s.CPUSomeBP = 10000
		if l := observe(t, c, s); l == Critical {
			t.Fatalf("full CPU contention at %d ms = critical", ms)
		}
	}
}

// DevGuard: recovery_requires_thirty_seconds_per_step_without_a_sample_gap.
func TestRecoveryIsOneStepPerThirtyClearSeconds(t *testing.T) {
	c := NewController()
	crit := sample(0)
	crit.MemAvailable = gib
	observe(t, c, crit)
	for ms := 2000; ms < 32000; ms += 2000 {
		if l := observe(t, c, sample(ms)); l != Critical {
			t.Fatalf("at %d ms = %s, want critical", ms, l)
		}
	}
	if st := c.Status(at(30000)); st.Reason != ReasonRecovering {
		t.Fatalf("reason while clear = %s, want recovering", st.Reason)
	}
	if l := observe(t, c, sample(32000)); l != Constrained {
		t.Fatalf("after 30 s clear = %s, want constrained", l)
	}
	for ms := 34000; ms < 62000; ms += 2000 {
		if l := observe(t, c, sample(ms)); l != Constrained {
			t.Fatalf("at %d ms = %s, want constrained", ms, l)
		}
	}
	if l := observe(t, c, sample(62000)); l != Normal {
		t.Fatalf("after 60 s clear = %s, want normal", l)
	}
	if !c.Settled() {
		t.Fatal("normal and clear, but not settled")
	}
}

// DevGuard: repeated_lag_or_linux_full_psi_trip_critical.
func TestRepeatedStallOrLagIsCritical(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Sample)
	}{
		{"memory_full_psi", func(s *Sample) { s.MemoryFullBP = 1000 }},
		{"control_lag", func(s *Sample) { s.ControlLag = time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewController()
			observe(t, c, sample(0))
			for _, ms := range []int{2000, 4000} {
				s := sample(ms)
				tc.change(&s)
				observe(t, c, s)
			}
			if st := c.Status(at(4000)); st.Level != Critical {
				t.Fatalf("two stalled samples = %s, want critical", st.Level)
			}
		})
	}
}

// DevGuard: disk_watermarks_apply_absolute_and_relative_limits.
func TestDiskWatermarksApplyAbsoluteAndRelativeLimits(t *testing.T) {
	c := NewController()
	observe(t, c, sample(0))
	low := sample(2000)
	low.DiskAvailable = 5 * gib // at or below max(5% of 100 GiB, 2 GiB)
	if l := observe(t, c, low); l != Critical {
		t.Fatalf("5 GiB free of 100 = %s, want critical", l)
	}
	for ms := 4000; ms < 80000; ms += 2000 {
		s := sample(ms)
		s.DiskAvailable = 10 * gib // not above max(10%, 4 GiB): not clear
		if l := observe(t, c, s); l != Critical {
			t.Fatalf("at %d ms with 10 GiB free = %s, want critical", ms, l)
		}
	}
	small := NewController()
	s := sample(0)
	s.DiskCapacity, s.DiskAvailable = 10*gib, 2*gib // 20% free, but not above 2 GiB
	if l := observe(t, small, s); l != Critical {
		t.Fatalf("2 GiB free of 10 = %s, want critical", l)
	}
}

// DevGuard: replayed_future_or_rebooted_samples_cannot_establish_health.
func TestReplayedFutureOrImpossibleSamplesClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Sample
		now  int
	}{
		{"replayed", sample(0), 2000},
		{"future", sample(4000), 2000},
		{"stale", sample(1000), 3001},
		{"available_above_capacity", func() Sample { s := sample(2000); s.DiskAvailable = 101 * gib; return s }(), 2000},
		{"memory_above_total", func() Sample { s := sample(2000); s.MemAvailable = 33 * gib; return s }(), 2000},
		{"psi_above_100", func() Sample { s := sample(2000); s.MemoryFullBP = 10001; return s }(), 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewController()
			observe(t, c, sample(0))
			if _, err := c.Observe(tc.s, at(tc.now)); !errors.Is(err, ErrInvalidSample) {
				t.Fatalf("Observe = %v, want %v", err, ErrInvalidSample)
			}
			if st := c.Status(at(tc.now)); st.Level != Critical || st.Reason != ReasonInvalidSample {
				t.Fatalf("status = %+v, want critical, invalid_sample", st)
			}
		})
	}
}

// DevGuard: missing_measurement_gap_does_not_count_as_a_recovery_interval.
func TestASamplingGapIsNotARecoveryInterval(t *testing.T) {
	c := NewController()
	crit := sample(0)
	crit.MemAvailable = gib
	observe(t, c, crit)
	observe(t, c, sample(2000))
	if l := observe(t, c, sample(32000)); l != Critical {
		t.Fatalf("clear samples 30 s apart with nothing between = %s, want critical", l)
	}
}

// A failed reading closes at once and restarts recovery.
func TestFailedReadingClosesAndRestartsRecovery(t *testing.T) {
	c := NewController()
	observe(t, c, sample(0))
	c.Failed(at(1000), ReasonSamplingFailed)
	if st := c.Status(at(1000)); st.Level != Critical || st.Reason != ReasonSamplingFailed {
		t.Fatalf("after a failure = %+v, want critical, sampling_failed", st)
	}
	for ms := 2000; ms < 32000; ms += 2000 {
		if l := observe(t, c, sample(ms)); l != Critical {
			t.Fatalf("at %d ms = %s, want critical until a 30 s step", ms, l)
		}
	}
	if l := observe(t, c, sample(32000)); l != Constrained {
		t.Fatalf("after 30 s clear = %s, want constrained", l)
	}
}

// CPU contention alone never closes admission, not even at start-up or
// after a critical signal has cleared: a host that is always busy (a CI
// runner) still admits against half its work capacity.
func TestCPUStallNeverKeepsAdmissionClosed(t *testing.T) {
	busy := func(ms int) Sample { s := sample(ms); s.CPUSomeBP = 10000; return s }
	c := NewController()
	if st, _ := c.Observe(busy(0), at(0)); st.Level != Constrained || st.Reason != ReasonCPUStall {
		t.Fatalf("first sample with the CPU busy = %+v, want constrained, cpu_stall", st)
	}

	c = NewController()
	crit := busy(0)
	crit.MemAvailable = gib
	observe(t, c, crit)
	for ms := 2000; ms < 32000; ms += 2000 {
		if l := observe(t, c, busy(ms)); l != Critical {
			t.Fatalf("at %d ms = %s, want critical until a recovery step", ms, l)
		}
	}
	for ms := 32000; ms < 100000; ms += 2000 {
		if l := observe(t, c, busy(ms)); l != Constrained {
			t.Fatalf("at %d ms with the CPU still busy = %s, want constrained", ms, l)
		}
	}
	if st := c.Status(at(98000)); st.Reason != ReasonCPUStall {
		t.Fatalf("reason = %s, want cpu_stall", st.Reason)
	}
}

// Any other soft signal in the first sample keeps admission closed, as
// DevGuard's first healthy sample rule does.
func TestFirstSampleWithASoftSignalOtherThanCPUStaysClosed(t *testing.T) {
	c := NewController()
	s := sample(0)
	s.MemAvailable = 3 * gib
	s.CPUSomeBP = 10000
	if st, _ := c.Observe(s, at(0)); st.Level != Critical {
		t.Fatalf("first sample with memory low = %+v, want critical", st)
	}
}

// A small state disk can admit: the watermarks scale down below 8 GiB,
// and the reason says how much is free.
func TestDiskWatermarksFitSmallFileSystems(t *testing.T) {
	const mib = int64(1) << 20
	small := func(ms int, free int64) Sample {
		s := sample(ms)
		s.DiskCapacity, s.DiskAvailable = 100*mib, free
		return s
	}
	c := NewController()
	if l := observe(t, c, small(0, 60*mib)); l != Normal {
		t.Fatalf("60 MiB free of 100 = %s, want normal", l)
	}
	if l := observe(t, c, small(2000, 30*mib)); l != Normal {
		t.Fatalf("30 MiB free of 100 = %s, want normal", l)
	}
	st, _ := c.Observe(small(4000, 25*mib), at(4000))
	if st.Level != Critical || st.Reason != ReasonDiskFree {
		t.Fatalf("25 MiB free of 100 = %+v, want critical, disk_free", st)
	}
	if got, want := st.Cause(), "state disk nearly full: 25 MiB free"; got != want {
		t.Errorf("Cause() = %q, want %q", got, want)
	}
	for ms := 6000; ms < 40000; ms += 2000 {
		if l := observe(t, c, small(ms, 45*mib)); l != Critical {
			t.Fatalf("at %d ms with 45 MiB free = %s, want critical: not above the clear mark", ms, l)
		}
	}
	for ms := 40000; ms < 70000; ms += 2000 {
		observe(t, c, small(ms, 51*mib))
	}
	if l := observe(t, c, small(72000, 51*mib)); l == Critical {
		t.Fatalf("after 30 s with 51 MiB free = %s, want recovering out of critical", l)
	}
	for _, tc := range []struct {
		capacity, critical, clear int64
	}{
		{100 * mib, 25 * mib, 50 * mib},
		{4 * gib, gib, 2 * gib},
		{8 * gib, 2 * gib, 4 * gib},
		{100 * gib, 5 * gib, 10 * gib}, // DevGuard's, unchanged
	} {
		if got := diskCritical(tc.capacity); got != tc.critical {
			t.Errorf("diskCritical(%d) = %d, want %d", tc.capacity, got, tc.critical)
		}
		if got := diskClear(tc.capacity); got != tc.clear {
			t.Errorf("diskClear(%d) = %d, want %d", tc.capacity, got, tc.clear)
		}
	}
}

func TestCauseSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		st   Status
		want string
	}{
		{Status{Reason: ReasonCPUStall}, "cpu pressure"},
		{Status{Reason: ReasonMemoryAvailable, MemAvailable: 512 << 20}, "memory low: 512 MiB available"},
		{Status{Reason: ReasonDiskFree, DiskAvailable: 3 << 20}, "state disk nearly full: 3 MiB free"},
		{Status{Reason: ReasonDiskFree, DiskAvailable: 4000}, "state disk nearly full: 4000 bytes free"},
		{Status{Reason: ReasonNotSampled}, "pressure not sampled yet"},
		{NotMonitored.Status(t0), "pressure not monitored"},
	} {
		if got := tc.st.Cause(); got != tc.want {
			t.Errorf("%s.Cause() = %q, want %q", tc.st.Reason, got, tc.want)
		}
	}
}
