package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Default backoff of a key whose Reconcile failed: the first retry waits
// DefaultBackoffBase, each further failure doubles the wait, up to
// DefaultBackoffMax.
const (
	DefaultBackoffBase = 5 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Minute
)

// Options configure a Controller. The zero value is usable.
type Options struct {
	// Workers is how many keys are reconciled at once. Default 1.
	Workers int
	// BackoffBase is the wait before the first retry of a failed key;
	// each further consecutive failure of that key doubles it. Default
	// DefaultBackoffBase.
	BackoffBase time.Duration
	// BackoffMax caps the wait between retries. Default DefaultBackoffMax.
	BackoffMax time.Duration
	// Clock measures backoff, RequeueAfter and reconcile durations.
	// Default the real clock; tests pass a fake one and step it.
	Clock clock.WithTicker
	// Logger receives the controller's records, with a "controller"
	// attribute added. Default slog.Default().
	Logger *slog.Logger
	// MetricsProvider, when set, receives the work queue's metrics (depth,
	// adds, latency, work duration, retries) under the controller's name.
	// Default none: the process-wide workqueue provider is not used either.
	//
	// The queue's unfinished-work gauges stay at zero: the queue would poll
	// to keep them (see tickless). Stats.Unfinished and Stats.Longest give
	// the same figures when asked.
	MetricsProvider workqueue.MetricsProvider
}

// Controller feeds keys to a Reconciler from a rate-limited work queue
// (k8s.io/client-go/util/workqueue), which gives it these guarantees:
//
//   - a key is queued at most once, however many times it is enqueued
//     before a worker takes it; a key enqueued while it is being reconciled
//     is reconciled once more after that call returns;
//   - a key is never reconciled by two workers at once;
//   - an error retries the key after a per-key exponential backoff (see
//     Options); success, RequeueAfter and terminal errors reset it;
//   - RequeueAfter enqueues the key again after that long;
//   - a terminal error (TerminalError) is logged and not retried;
//   - a panic in Reconcile is recovered, logged with its stack and retried
//     like an error (PanicError).
//
// An Enqueue of a key whose retry is pending reconciles it at once; the
// pending retry still fires later. Keys whose backoff or RequeueAfter is
// pending when the controller stops are dropped: the next start begins with
// a full relist.
//
// A Controller runs once: Start blocks until its context ends, then waits
// for in-flight Reconcile calls to return.
type Controller struct {
	name    string
	r       Reconciler
	workers int
	clock   clock.WithTicker
	log     *slog.Logger
	limiter workqueue.TypedRateLimiter[Key]
	metrics workqueue.MetricsProvider

	// queue is set once, by Start. Enqueue reads it without a lock.
	queue atomic.Pointer[queueRef]

	// mu guards the fields that follow. Enqueue takes it only while queue
	// is still unset.
	mu      sync.Mutex
	started bool
	// pending holds keys enqueued before Start, in arrival order, once
	// each; pendingSet dedupes them.
	pending    []Key
	pendingSet map[Key]struct{}

	// failMu guards failing.
	failMu sync.Mutex
	// failing holds, per key that failed since its last success, the
	// error last logged for it: a retry that fails the same way logs at
	// debug level only, so that a key backing off logs one line per
	// change of cause, not one per retry.
	failing map[Key]string

	stats counters
	// busy holds, per worker, when the call it is running started, as
	// nanoseconds since made on the controller's clock plus one, or 0
	// while it waits. Offsets from made keep the monotonic reading.
	busy []atomic.Int64
	made time.Time
}

type queueRef struct {
	q workqueue.TypedRateLimitingInterface[Key]
}

var _ Enqueuer = (*Controller)(nil)

// NewController returns a controller named name (used in logs and queue
// metrics) that reconciles with r. It returns ErrInvalidOptions when name
// is empty, r is nil, or an option is negative or inconsistent.
func NewController(name string, r Reconciler, o Options) (*Controller, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("name is empty: %w", ErrInvalidOptions)
	case r == nil:
		return nil, fmt.Errorf("controller %q: reconciler is nil: %w", name, ErrInvalidOptions)
	case o.Workers < 0:
		return nil, fmt.Errorf("controller %q: workers %d is negative: %w", name, o.Workers, ErrInvalidOptions)
	case o.BackoffBase < 0 || o.BackoffMax < 0:
		return nil, fmt.Errorf("controller %q: backoff is negative: %w", name, ErrInvalidOptions)
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffBase)
	}
	if o.BackoffMax < o.BackoffBase {
		return nil, fmt.Errorf("controller %q: backoff max %v is below base %v: %w",
			name, o.BackoffMax, o.BackoffBase, ErrInvalidOptions)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Controller{
		name:       name,
		r:          r,
		workers:    o.Workers,
		clock:      o.Clock,
		log:        o.Logger.With("controller", name),
		limiter:    workqueue.NewTypedItemExponentialFailureRateLimiter[Key](o.BackoffBase, o.BackoffMax),
		metrics:    o.MetricsProvider,
		pendingSet: make(map[Key]struct{}),
		failing:    make(map[Key]string),
		busy:       make([]atomic.Int64, o.Workers),
		made:       o.Clock.Now(),
	}, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// Enqueue asks for key to be reconciled. It never blocks on a Reconcile
// call and is safe from any goroutine, including a store's Handler and a
// Reconcile call. Before Start the key is held and queued when Start runs;
// after the controller stopped, Enqueue does nothing.
func (c *Controller) Enqueue(key Key) {
	if ref := c.queue.Load(); ref != nil {
		ref.q.Add(key)
		return
	}
	c.mu.Lock()
	if ref := c.queue.Load(); ref != nil {
		// Start ran since the load above.
		c.mu.Unlock()
		ref.q.Add(key)
		return
	}
	if _, ok := c.pendingSet[key]; !ok {
		c.pendingSet[key] = struct{}{}
		c.pending = append(c.pending, key)
	}
	c.mu.Unlock()
}

// Start runs the workers and blocks until ctx ends. It then stops the
// queue, waits until every in-flight Reconcile call has returned, and
// returns nil: stopping by cancellation is success. Keys still queued are
// not reconciled once ctx has ended. It returns ErrAlreadyStarted when
// called a second time.
func (c *Controller) Start(ctx context.Context) error {
	q, err := c.startQueue()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i := range c.workers {
		wg.Go(func() { c.work(ctx, q, &c.busy[i]) })
	}
	c.log.Info("controller started", "workers", c.workers)
	<-ctx.Done()
	// ShutDown wakes idle workers; busy ones finish their call first.
	q.ShutDown()
	wg.Wait()
	c.log.Info("controller stopped")
	return nil
}

// startQueue makes the queue and moves the keys enqueued before Start
// into it.
func (c *Controller) startQueue() (workqueue.TypedRateLimitingInterface[Key], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil, fmt.Errorf("controller %q: %w", c.name, ErrAlreadyStarted)
	}
	c.started = true
	cfg := workqueue.TypedRateLimitingQueueConfig[Key]{Clock: tickless{c.clock}}
	if c.metrics != nil {
		// An unnamed queue reports no metrics; a named one without a
		// provider would report to the process-wide one.
		cfg.Name = c.name
		cfg.MetricsProvider = c.metrics
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(c.limiter, cfg)
	for _, k := range c.pending {
		q.Add(k)
	}
	c.pending, c.pendingSet = nil, nil
	c.queue.Store(&queueRef{q: q})
	return q, nil
}

// work takes keys until the queue shuts down or ctx ends. It records the
// start of each call in busy.
func (c *Controller) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key], busy *atomic.Int64) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		if ctx.Err() != nil {
			// Stopping: leave the rest of the queue alone.
			q.Done(key)
			return
		}
		c.process(ctx, q, key, busy)
	}
}

// process reconciles key once and decides when it runs again.
func (c *Controller) process(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key], key Key, busy *atomic.Int64) {
	defer q.Done(key)
	c.stats.inFlight.Add(1)
	start := c.clock.Now()
	busy.Store(int64(start.Sub(c.made)) + 1)
	res, err := c.call(ctx, key)
	elapsed := c.clock.Since(start)
	busy.Store(0)
	c.stats.inFlight.Add(-1)
	c.stats.observe(elapsed)

	switch {
	case err == nil:
		q.Forget(key)
		if c.recovered(key) {
			c.log.InfoContext(ctx, "reconcile succeeded after failures", "key", key.String())
		}
		if res.RequeueAfter > 0 {
			c.stats.requeues.Add(1)
			q.AddAfter(key, res.RequeueAfter)
		}
		if c.log.Enabled(ctx, slog.LevelDebug) {
			c.log.DebugContext(ctx, "reconciled", "key", key.String(), "duration", elapsed,
				"requeue_after", res.RequeueAfter)
		}
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// Interrupted by shutdown: neither a failure nor worth a retry;
		// the next start reconciles everything again.
		c.log.DebugContext(ctx, "reconcile interrupted by shutdown", "key", key.String(), "duration", elapsed)
	case IsTerminal(err):
		c.stats.terminal.Add(1)
		q.Forget(key)
		c.recovered(key)
		c.log.ErrorContext(ctx, "reconcile failed; not retrying until the object changes",
			"key", key.String(), "duration", elapsed, "err", err)
	default:
		c.stats.errors.Add(1)
		delay := c.limiter.When(key)
		q.AddAfter(key, delay)
		attrs := []any{"key", key.String(), "duration", elapsed, "err", err,
			"failures", c.limiter.NumRequeues(key), "retry_in", delay}
		pe := (*PanicError)(nil)
		if errors.As(err, &pe) {
			c.stats.panics.Add(1)
			attrs = append(attrs, "stack", string(pe.Stack))
		}
		if c.newCause(key, err) || pe != nil {
			c.log.ErrorContext(ctx, "reconcile failed; will retry", attrs...)
		} else {
			c.log.DebugContext(ctx, "reconcile failed again, the same way; will retry", attrs...)
		}
	}
}

// call runs Reconcile and turns a panic into a PanicError.
func (c *Controller) call(ctx context.Context, key Key) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = Result{}, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return c.r.Reconcile(ctx, Request{Key: key})
}

// Stats returns a snapshot of the controller's counters, for metrics.
func (c *Controller) Stats() Stats {
	s := c.stats.snapshot()
	now := int64(c.clock.Since(c.made)) + 1
	for i := range c.busy {
		if started := c.busy[i].Load(); started != 0 {
			d := time.Duration(now - started)
			s.Unfinished += d
			s.Longest = max(s.Longest, d)
		}
	}
	if ref := c.queue.Load(); ref != nil {
		s.QueueDepth = ref.q.Len()
	} else {
		c.mu.Lock()
		s.QueueDepth = len(c.pending)
		c.mu.Unlock()
	}
	return s
}

// tickless is the clock the work queue is given: the controller's clock,
// except that its tickers never tick. The queue's only tickers poll: one
// samples unfinished work every 500 ms when metrics are kept, the other is
// the delaying queue's 10 s heartbeat, insurance against a missed wakeup
// that its timers and add channel already prevent. Without them an idle
// controller is never woken; Stats computes unfinished work when asked.
type tickless struct{ clock.WithTicker }

func (tickless) NewTicker(time.Duration) clock.Ticker { return stoppedTicker{} }

// stoppedTicker never ticks: its channel is nil.
type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

// newCause notes err as key's failure and reports whether it differs from
// the one noted before: a new cause, worth a line at error level.
func (c *Controller) newCause(key Key, err error) bool {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	msg := err.Error()
	last, ok := c.failing[key]
	c.failing[key] = msg
	return !ok || last != msg
}

// recovered forgets key's failure and reports whether it had one.
func (c *Controller) recovered(key Key) bool {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	_, ok := c.failing[key]
	delete(c.failing, key)
	return ok
}
