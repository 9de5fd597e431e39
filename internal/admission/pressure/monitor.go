package pressure

import (
	"context"
	"io"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Default sampling intervals.
const (
	// DefaultSlow is the interval while the level is normal and settled:
	// it bounds how late a change in MemAvailable or free disk, which
	// have no kernel notification, is seen.
	DefaultSlow = 10 * time.Second
	// DefaultFast is the interval while the level is elevated or a soft
	// signal awaits its second sample, as DevGuard samples.
	DefaultFast = 2 * time.Second
)

// Sampler reads the host's signals. It fills every field of Sample except
// At, ValidFor and ControlLag, which the monitor sets.
type Sampler interface {
	// Sample returns an error wrapping ErrNoSignal when a required signal
	// cannot be read.
	Sample(ctx context.Context) (Sample, error)
}

// Triggers delivers kernel stall notifications.
type Triggers interface {
	// Run sends on wake (without blocking) whenever the kernel reports a
	// stall that crosses a trigger's threshold, until ctx ends; it then
	// returns nil once no further send can happen. It returns an error
	// when the triggers stop working; the monitor then samples on its
	// timer alone.
	Run(ctx context.Context, wake chan<- struct{}) error
}

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	// Sampler reads the signals. Required.
	Sampler Sampler
	// Triggers wakes the monitor on stalls; nil samples on the timer only.
	Triggers Triggers
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Slow and Fast default to DefaultSlow and DefaultFast.
	Slow, Fast time.Duration
	// OnLevel, when set, is called from Run's goroutine after a sample
	// changed the level, with the status before and after: what an
	// event marks.
	OnLevel func(from, to Status)
}

// Monitor samples the host, event-driven where PSI triggers work, and
// keeps a Controller current. Its Status is what the admission authority
// reads.
type Monitor struct {
	ctrl     *Controller
	sampler  Sampler
	triggers Triggers
	clock    clock.Clock
	slow     time.Duration
	fast     time.Duration
	onLevel  func(from, to Status)

	// closer releases what the monitor holds (its PSI triggers), if any.
	closer io.Closer

	// onArm, when set by tests, is called each time the monitor arms its
	// timer, with the interval.
	onArm func(time.Duration)

	// mu guards the field that follows.
	mu          sync.Mutex
	eventDriven bool
}

// NewMonitor returns a monitor whose controller starts closed.
func NewMonitor(cfg MonitorConfig) *Monitor {
	m := &Monitor{
		ctrl:     NewController(),
		sampler:  cfg.Sampler,
		triggers: cfg.Triggers,
		clock:    cfg.Clock,
		slow:     cfg.Slow,
		fast:     cfg.Fast,
		onLevel:  cfg.OnLevel,
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.slow <= 0 {
		m.slow = DefaultSlow
	}
	if m.fast <= 0 {
		m.fast = DefaultFast
	}
	return m
}

// Close releases the PSI triggers of a monitor from NewHostMonitor. Call
// it after Run returned.
func (m *Monitor) Close() error {
	if m.closer == nil {
		return nil
	}
	return m.closer.Close()
}

// Status returns the pressure level in force at now.
func (m *Monitor) Status(now time.Time) Status { return m.ctrl.Status(now) }

// EventDriven reports whether PSI triggers are delivering wake-ups, as
// opposed to sampling on the timer only.
func (m *Monitor) EventDriven() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.eventDriven
}

func (m *Monitor) setEventDriven(v bool) {
	m.mu.Lock()
	m.eventDriven = v
	m.mu.Unlock()
}

// Run samples until ctx ends and returns nil then. When it returns the
// controller is closed (critical, monitor_stopped): admission never runs
// on a level nobody keeps current.
func (m *Monitor) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	trigErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		m.setEventDriven(false)
		m.ctrl.Failed(m.clock.Now(), ReasonStopped)
	}()
	trigCtx, stopTriggers := context.WithCancel(ctx)
	defer stopTriggers()
	if m.triggers != nil {
		m.setEventDriven(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			trigErr <- m.triggers.Run(trigCtx, wake)
		}()
	}
	m.sample(ctx, 0)
	for {
		interval := m.fast
		if m.ctrl.Settled() {
			interval = m.slow
		}
		scheduled := m.clock.Now().Add(interval)
		timer := m.clock.NewTimer(interval)
		if m.onArm != nil {
			m.onArm(interval)
		}
		var lag time.Duration
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
			lag = max(m.clock.Now().Sub(scheduled), 0)
		case <-wake:
			timer.Stop()
		case <-trigErr:
			// The triggers stopped (their cgroup went away, say); the
			// timer alone drives sampling from now on.
			timer.Stop()
			m.setEventDriven(false)
			trigErr = nil
			continue
		}
		m.sample(ctx, lag)
	}
}

// sample takes one reading and feeds it to the controller.
func (m *Monitor) sample(ctx context.Context, lag time.Duration) {
	s, err := m.sampler.Sample(ctx)
	now := m.clock.Now()
	from := m.ctrl.Status(now)
	defer func() {
		if to := m.ctrl.Status(now); to.Level != from.Level && m.onLevel != nil {
			m.onLevel(from, to)
		}
	}()
	if err != nil {
		m.ctrl.Failed(now, ReasonSamplingFailed)
		return
	}
	s.At = now
	// Current until the longest interval has passed twice more than the
	// fast one: a stuck sampler closes admission.
	s.ValidFor = m.slow + 2*m.fast
	s.ControlLag = lag
	// A sample taken now is never stale or future; an invalid one has
	// already closed admission inside Observe.
	_, _ = m.ctrl.Observe(s, now)
}
