package pressure

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// fakeSampler returns what the test sets; it stands in for /proc where
// a test needs a memory shortage on demand.
type fakeSampler struct {
	mu  sync.Mutex
	s   Sample
	err error
}

func (f *fakeSampler) Sample(ctx context.Context) (Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s, f.err
}

func (f *fakeSampler) set(s Sample, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s, f.err = s, err
}

// fakeTriggers delivers a stall notification when the test fires it.
type fakeTriggers struct {
	fire chan struct{}
	fail chan error
}

func (f *fakeTriggers) Run(ctx context.Context, wake chan<- struct{}) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-f.fail:
			return err
		case <-f.fire:
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

type monitorRig struct {
	m       *Monitor
	clock   *testclock.FakeClock
	sampler *fakeSampler
	trig    *fakeTriggers
	armed   chan time.Duration
	levels  chan [2]Status // OnLevel's calls
	cancel  func()
	done    chan error
}

func healthy() Sample {
	return Sample{MemTotal: 32 * gib, MemAvailable: 20 * gib, DiskCapacity: 100 * gib, DiskAvailable: 40 * gib}
}

func startMonitor(t *testing.T) *monitorRig {
	t.Helper()
	r := &monitorRig{
		clock:   testclock.NewFakeClock(t0),
		sampler: &fakeSampler{s: healthy()},
		trig:    &fakeTriggers{fire: make(chan struct{}), fail: make(chan error)},
		armed:   make(chan time.Duration, 64),
		levels:  make(chan [2]Status, 64),
		done:    make(chan error, 1),
	}
	r.m = NewMonitor(MonitorConfig{Sampler: r.sampler, Triggers: r.trig, Clock: r.clock,
		OnLevel: func(from, to Status) { r.levels <- [2]Status{from, to} }})
	r.m.onArm = func(d time.Duration) { r.armed <- d }
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { r.done <- r.m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// next waits for the monitor to sample and arm its timer again, and
// returns the interval it armed.
func (r *monitorRig) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-r.armed:
		return d
	case <-time.After(testutil.Deadline):
		t.Fatal("the monitor did not sample and re-arm")
	}
	return 0
}

func TestMonitorSamplesSlowlyWhileSettled(t *testing.T) {
	r := startMonitor(t)
	if d := r.next(t); d != DefaultSlow {
		t.Fatalf("armed %s after a healthy first sample, want %s", d, DefaultSlow)
	}
	if st := r.m.Status(r.clock.Now()); st.Level != Normal || !r.m.EventDriven() {
		t.Fatalf("status %+v event-driven %v, want normal and event-driven", st, r.m.EventDriven())
	}
	r.clock.Step(DefaultSlow)
	if d := r.next(t); d != DefaultSlow {
		t.Fatalf("armed %s, want %s", d, DefaultSlow)
	}
	// Three slow intervals without a sample is stale.
	if st := r.m.Status(r.clock.Now().Add(DefaultSlow + 2*DefaultFast + time.Nanosecond)); st.Level != Critical || st.Reason != ReasonStale {
		t.Fatalf("status long after the last sample = %+v, want critical, stale", st)
	}
}

// A PSI trigger wakes the monitor at once; a soft signal then needs its
// second sample, which the fast timer takes.
func TestTriggerWakesAtOnceAndFastSamplingConfirms(t *testing.T) {
	r := startMonitor(t)
	r.next(t)
	s := healthy()
	s.MemAvailable = 3 * gib
	r.sampler.set(s, nil)
	r.clock.Step(time.Second)
	r.trig.fire <- struct{}{}
	if d := r.next(t); d != DefaultFast {
		t.Fatalf("armed %s after one soft sample, want %s", d, DefaultFast)
	}
	if st := r.m.Status(r.clock.Now()); st.Level != Normal {
		t.Fatalf("after one soft sample = %s, want still normal", st.Level)
	}
	r.clock.Step(DefaultFast)
	r.next(t)
	if st := r.m.Status(r.clock.Now()); st.Level != Constrained || st.Reason != ReasonMemoryAvailable {
		t.Fatalf("after two soft samples = %+v, want constrained, memory_available", st)
	}
}

// Recovery runs on the fast timer only while elevated, then the monitor
// goes back to the slow one.
func TestRecoveryRunsOnTheFastTimerThenGoesSlow(t *testing.T) {
	r := startMonitor(t)
	r.next(t)
	s := healthy()
	s.MemAvailable = gib
	r.sampler.set(s, nil)
	r.clock.Step(time.Second)
	r.trig.fire <- struct{}{}
	if d := r.next(t); d != DefaultFast {
		t.Fatalf("armed %s while critical, want %s", d, DefaultFast)
	}
	r.sampler.set(healthy(), nil)
	steps := 0
	var last time.Duration
	for r.m.Status(r.clock.Now()).Level != Normal {
		r.clock.Step(DefaultFast)
		if last = r.next(t); r.m.Status(r.clock.Now()).Level != Normal && last != DefaultFast {
			t.Fatalf("armed %s while recovering, want %s", last, DefaultFast)
		}
		if steps++; steps > 40 {
			t.Fatal("no recovery after 80 s of clear samples")
		}
	}
	// The first clear sample starts the first step: DevGuard's 62 s.
	if got, want := time.Duration(steps)*DefaultFast, 2*RecoveryStep+DefaultFast; got != want {
		t.Fatalf("recovered after %s, want %s", got, want)
	}
	if last != DefaultSlow {
		t.Fatalf("armed %s once normal again, want %s", last, DefaultSlow)
	}
}

func TestFailedSamplingClosesAndStoppingCloses(t *testing.T) {
	r := startMonitor(t)
	r.next(t)
	r.sampler.set(Sample{}, ErrNoSignal)
	r.clock.Step(DefaultSlow)
	r.next(t)
	if st := r.m.Status(r.clock.Now()); st.Level != Critical || st.Reason != ReasonSamplingFailed {
		t.Fatalf("after a failed sample = %+v, want critical, sampling_failed", st)
	}
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run = %v, want nil on cancellation", err)
	}
	r.done <- nil // for the cleanup
	if st := r.m.Status(r.clock.Now()); st.Level != Critical || st.Reason != ReasonStopped {
		t.Fatalf("after Run returned = %+v, want critical, monitor_stopped", st)
	}
}

func TestLostTriggersFallBackToTheTimer(t *testing.T) {
	r := startMonitor(t)
	r.next(t)
	r.trig.fail <- errors.New("cgroup removed")
	if d := r.next(t); d != DefaultSlow || r.m.EventDriven() {
		t.Fatalf("after losing triggers: armed %s event-driven %v, want %s and false", d, r.m.EventDriven(), DefaultSlow)
	}
	r.clock.Step(DefaultSlow)
	r.next(t)
	if st := r.m.Status(r.clock.Now()); st.Level != Normal {
		t.Fatalf("status = %s, want normal from timer samples", st.Level)
	}
}

// OnLevel hears each change of the level, after the sample that made
// it, and nothing in between.
func TestMonitorReportsEachLevelChange(t *testing.T) {
	r := startMonitor(t)
	r.next(t)
	want := func(from, to Level, reason Reason) {
		t.Helper()
		select {
		case got := <-r.levels:
			if got[0].Level != from || got[1].Level != to || got[1].Reason != reason {
				t.Fatalf("OnLevel(%s, %s/%s), want (%s, %s/%s)", got[0].Level, got[1].Level, got[1].Reason, from, to, reason)
			}
		default:
			t.Fatalf("no OnLevel call, want %s → %s", from, to)
		}
	}
	want(Critical, Normal, ReasonNone)
	disk := healthy()
	disk.DiskAvailable = gib
	r.sampler.set(disk, nil)
	r.clock.Step(DefaultSlow)
	r.next(t)
	want(Normal, Critical, ReasonDiskFree)
	r.clock.Step(DefaultFast)
	r.next(t)
	select {
	case got := <-r.levels:
		t.Fatalf("OnLevel(%+v) without a change of level", got)
	default:
	}
}
