package reconcile

import (
	"slices"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of one controller's counters since it was made. The
// metrics code reads it through Controller.Stats and Controller.Name.
type Stats struct {
	// Reconciles counts Reconcile calls that returned (or panicked).
	Reconciles uint64
	// Errors counts calls that failed and were retried with backoff,
	// panics included.
	Errors uint64
	// Panics counts the calls among Errors that panicked.
	Panics uint64
	// TerminalErrors counts calls that failed with a TerminalError and were
	// not retried.
	TerminalErrors uint64
	// Requeues counts successful calls that asked for RequeueAfter.
	Requeues uint64
	// InFlight is the number of calls running now.
	InFlight int64
	// Unfinished is how long the calls running now have run so far,
	// summed, and Longest the longest of them, on the controller's clock:
	// large values mean a stuck worker. Both are zero when no call runs.
	Unfinished, Longest time.Duration
	// QueueDepth is the number of keys waiting for a worker now (keys whose
	// backoff or RequeueAfter is pending are not counted).
	QueueDepth int
	// Duration is the distribution of call durations, on the controller's
	// clock.
	Duration Histogram
}

// Histogram is a distribution of durations over fixed buckets, in the shape
// a Prometheus histogram is built from.
type Histogram struct {
	// Count is the number of observations; Sum their total.
	Count uint64
	Sum   time.Duration
	// Bounds are the buckets' inclusive upper bounds, ascending.
	Bounds []time.Duration
	// Counts has one entry per bound, counting observations above the
	// previous bound and at most this one, then one more for observations
	// above the last bound. Counts are not cumulative.
	Counts []uint64
}

// durationBounds are the upper bounds of Histogram buckets: 100µs to 10s.
var durationBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// counters are a controller's live counters, updated without locks. A
// snapshot taken during updates may be off by the calls in progress.
type counters struct {
	reconciles, errors, panics, terminal, requeues atomic.Uint64
	inFlight                                       atomic.Int64
	durationSum                                    atomic.Int64
	buckets                                        [len(durationBounds) + 1]atomic.Uint64
}

func (c *counters) observe(d time.Duration) {
	c.reconciles.Add(1)
	c.durationSum.Add(int64(d))
	i, _ := slices.BinarySearch(durationBounds[:], d)
	c.buckets[i].Add(1)
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Reconciles:     c.reconciles.Load(),
		Errors:         c.errors.Load(),
		Panics:         c.panics.Load(),
		TerminalErrors: c.terminal.Load(),
		Requeues:       c.requeues.Load(),
		InFlight:       c.inFlight.Load(),
		Duration: Histogram{
			Sum:    time.Duration(c.durationSum.Load()),
			Bounds: slices.Clone(durationBounds[:]),
			Counts: make([]uint64, len(c.buckets)),
		},
	}
	for i := range c.buckets {
		n := c.buckets[i].Load()
		s.Duration.Counts[i] = n
		s.Duration.Count += n
	}
	return s
}
