package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/marshal-dev/marshal/reconcile"
)

var (
	keyA = reconcile.Key{Kind: "Profile", Name: "a"}
	keyB = reconcile.Key{Kind: "Profile", Name: "b"}
)

func TestNewControllerRejectsInvalidOptions(t *testing.T) {
	ok := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})
	tests := []struct {
		name  string
		cname string
		r     reconcile.Reconciler
		o     reconcile.Options
	}{
		{name: "empty_name", cname: "", r: ok},
		{name: "nil_reconciler", cname: "x", r: nil},
		{name: "negative_workers", cname: "x", r: ok, o: reconcile.Options{Workers: -1}},
		{name: "negative_backoff", cname: "x", r: ok, o: reconcile.Options{BackoffBase: -time.Second}},
		{name: "max_below_base", cname: "x", r: ok, o: reconcile.Options{BackoffBase: time.Second, BackoffMax: time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := reconcile.NewController(tc.cname, tc.r, tc.o)
			if !errors.Is(err, reconcile.ErrInvalidOptions) || c != nil {
				t.Errorf("NewController(%q, %v) = %v, %v; want nil, ErrInvalidOptions", tc.cname, tc.o, c, err)
			}
		})
	}
}

// A key enqueued many times while it is being reconciled is reconciled
// exactly once more after that call returns, by whichever worker.
func TestEnqueueWhileReconcilingCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		entered := make(chan struct{})
		release := make(chan struct{})
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if calls.Add(1) == 1 {
				close(entered)
				<-release
			}
			return reconcile.Result{}, nil
		})
		c := newController(t, r, reconcile.Options{Workers: 4})
		start(t, c)
		c.Enqueue(keyA)
		<-entered
		for range 1000 {
			c.Enqueue(keyA)
		}
		synctest.Wait()
		if got := calls.Load(); got != 1 {
			t.Fatalf("while the first call runs: %d calls, want 1 (another worker took the key)", got)
		}
		close(release)
		synctest.Wait()
		if got := calls.Load(); got != 2 {
			t.Errorf("after 1000 enqueues during the first call: %d calls, want 2", got)
		}
	})
}

// Many workers, keys that re-enqueue themselves from inside Reconcile and
// outside goroutines enqueueing at the same time: no key is ever inside
// Reconcile twice at once.
func TestNoKeyReconciledConcurrently(t *testing.T) {
	// Fewer keys than workers, so idle workers are always waiting to take
	// a key the moment it is queued again.
	const (
		nKeys   = 4
		rounds  = 2000
		workers = 8
	)
	keys := make([]reconcile.Key, nKeys)
	index := make(map[reconcile.Key]int, nKeys)
	for i := range keys {
		keys[i] = reconcile.Key{Kind: "Workspace", Name: fmt.Sprintf("w%d", i)}
		index[keys[i]] = i
	}
	var (
		inside     [nKeys]atomic.Int32
		count      [nKeys]atomic.Int32
		overlaps   atomic.Int32
		finished   atomic.Int32
		allDone    = make(chan struct{})
		controller *reconcile.Controller
	)
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		i := index[req.Key]
		if inside[i].Add(1) != 1 {
			overlaps.Add(1)
		}
		runtime.Gosched() // widen the window another worker would need
		n := count[i].Add(1)
		if n < rounds {
			// Re-enqueue while still inside: the queue must hold it
			// until this call is done.
			controller.Enqueue(req.Key)
			for range 3 {
				runtime.Gosched()
			}
		}
		inside[i].Add(-1)
		if n == rounds && finished.Add(1) == nKeys {
			close(allDone)
		}
		return reconcile.Result{}, nil
	})
	controller = newController(t, r, reconcile.Options{Workers: workers})
	stop := start(t, controller)

	var enqueuers sync.WaitGroup
	for g := range 4 {
		enqueuers.Go(func() {
			for i := range rounds * nKeys / 4 {
				controller.Enqueue(keys[(i*7+g)%nKeys])
			}
		})
	}
	recv(t, allDone, "every key to reach its rounds")
	enqueuers.Wait()
	stop()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("a key was inside Reconcile on two workers at once %d times", n)
	}
	if s := controller.Stats(); s.Reconciles < nKeys*rounds {
		t.Errorf("Stats().Reconciles = %d, want at least %d", s.Reconciles, nKeys*rounds)
	}
}

// failing is a Reconciler that records the controller clock's time of
// every call and fails while fail is set.
type failing struct {
	now   func() time.Time
	fail  atomic.Bool
	mu    sync.Mutex
	calls []time.Time
}

func (f *failing) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, f.now())
	f.mu.Unlock()
	if f.fail.Load() {
		return reconcile.Result{}, errors.New("cgroup busy")
	}
	return reconcile.Result{}, nil
}

func (f *failing) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

// Consecutive failures of a key wait base, 2·base, 4·base … up to max
// between retries, on the controller's clock; a success resets the
// sequence. Each retry fires exactly at its time: not a nanosecond before.
func TestBackoffGrowsExponentiallyAndResetsOnSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		f := &failing{now: clk.Now}
		f.fail.Store(true)
		c := newController(t, f, reconcile.Options{
			Clock:       clk,
			BackoffBase: time.Millisecond,
			BackoffMax:  8 * time.Millisecond,
		})
		start(t, c)

		// expectRetryAfter steps the clock to just before d, checks that
		// nothing ran, then steps to d and checks exactly one call ran.
		expectRetryAfter := func(d time.Duration) {
			t.Helper()
			before := len(f.times())
			synctest.Wait()
			clk.Step(d - time.Nanosecond)
			synctest.Wait()
			if got := len(f.times()); got != before {
				t.Fatalf("retry ran %v early", time.Nanosecond)
			}
			clk.Step(time.Nanosecond)
			synctest.Wait()
			calls := f.times()
			if len(calls) != before+1 {
				t.Fatalf("after %v: %d calls, want %d", d, len(calls), before+1)
			}
			if gap := calls[before].Sub(calls[before-1]); gap != d {
				t.Fatalf("retry after %v, want %v", gap, d)
			}
		}

		c.Enqueue(keyA)
		synctest.Wait()
		if got := len(f.times()); got != 1 {
			t.Fatalf("first reconcile: %d calls, want 1", got)
		}
		for _, d := range []time.Duration{1, 2, 4, 8, 8, 8} {
			expectRetryAfter(d * time.Millisecond)
		}

		// The next retry succeeds and forgets the key's failures.
		f.fail.Store(false)
		expectRetryAfter(8 * time.Millisecond)
		clk.Step(time.Hour)
		synctest.Wait()
		if got := len(f.times()); got != 8 {
			t.Fatalf("after success: %d calls, want 8 (no further retry)", got)
		}

		// A new failure starts again at base.
		f.fail.Store(true)
		c.Enqueue(keyA)
		synctest.Wait()
		expectRetryAfter(time.Millisecond)
		expectRetryAfter(2 * time.Millisecond)

		// Backoff is per key: another key starts at base.
		c.Enqueue(keyB)
		synctest.Wait()
		s := c.Stats()
		if s.Errors != 11 || s.Reconciles != 12 {
			t.Errorf("Stats() = %d errors, %d reconciles; want 11, 12", s.Errors, s.Reconciles)
		}
	})
}

// RequeueAfter reconciles the key again exactly at the fake clock's time.
func TestRequeueAfterFiresAtClockTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		var calls []time.Time
		var mu sync.Mutex
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, clk.Now())
			if len(calls) == 1 {
				return reconcile.Result{RequeueAfter: 90 * time.Second}, nil
			}
			return reconcile.Result{}, nil
		})
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
		c := newController(t, r, reconcile.Options{Clock: clk})
		start(t, c)

		c.Enqueue(keyA)
		synctest.Wait()
		clk.Step(90*time.Second - time.Nanosecond)
		synctest.Wait()
		if got := count(); got != 1 {
			t.Fatalf("before RequeueAfter elapsed: %d calls, want 1", got)
		}
		clk.Step(time.Nanosecond)
		synctest.Wait()
		if got := count(); got != 2 {
			t.Fatalf("when RequeueAfter elapsed: %d calls, want 2", got)
		}
		if gap := calls[1].Sub(calls[0]); gap != 90*time.Second {
			t.Errorf("requeued after %v, want 90s", gap)
		}
		if s := c.Stats(); s.Requeues != 1 || s.Errors != 0 {
			t.Errorf("Stats() = %+v, want 1 requeue, 0 errors", s)
		}
	})
}

// counts is the part of Stats a test compares exactly.
type counts struct {
	Reconciles, Errors, Panics, TerminalErrors, Requeues uint64
}

func countsOf(s reconcile.Stats) counts {
	return counts{s.Reconciles, s.Errors, s.Panics, s.TerminalErrors, s.Requeues}
}

// How each kind of outcome is retried. Every call returns the same outcome;
// one step of an hour on the fake clock passes the first backoff (a
// second), so a retried key runs exactly twice.
func TestOutcomeRetries(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		result    reconcile.Result
		err       error
		panics    bool
		wantCalls int
		want      counts
	}{
		{name: "success_not_retried", wantCalls: 1,
			want: counts{Reconciles: 1}},
		{name: "error_retried", err: boom, wantCalls: 2,
			want: counts{Reconciles: 2, Errors: 2}},
		{name: "error_wins_over_requeue_after", err: boom, result: reconcile.Result{RequeueAfter: 2 * time.Hour}, wantCalls: 2,
			want: counts{Reconciles: 2, Errors: 2}},
		{name: "terminal_not_retried", err: reconcile.TerminalError(boom), wantCalls: 1,
			want: counts{Reconciles: 1, TerminalErrors: 1}},
		{name: "wrapped_terminal_not_retried", err: fmt.Errorf("profile %q: %w", "a", reconcile.TerminalError(boom)), wantCalls: 1,
			want: counts{Reconciles: 1, TerminalErrors: 1}},
		{name: "panic_retried", panics: true, wantCalls: 2,
			want: counts{Reconciles: 2, Errors: 2, Panics: 2}},
		{name: "requeue_after_beyond_step_not_run", result: reconcile.Result{RequeueAfter: 2 * time.Hour}, wantCalls: 1,
			want: counts{Reconciles: 1, Requeues: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := newFakeClock()
				var calls atomic.Int32
				r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					calls.Add(1)
					if tc.panics {
						panic("reconciler panicked")
					}
					return tc.result, tc.err
				})
				c := newController(t, r, reconcile.Options{Clock: clk, BackoffBase: time.Second, BackoffMax: time.Minute})
				stop := start(t, c)
				c.Enqueue(keyA)
				synctest.Wait()
				clk.Step(time.Hour)
				synctest.Wait()
				stop()
				if got := int(calls.Load()); got != tc.wantCalls {
					t.Errorf("%d calls, want %d", got, tc.wantCalls)
				}
				if got := countsOf(c.Stats()); got != tc.want {
					t.Errorf("Stats() = %+v, want %+v", got, tc.want)
				}
			})
		})
	}
}
