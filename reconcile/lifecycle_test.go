package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/marshal-dev/marshal/reconcile"
)

// Start returns only after the Reconcile call in flight when its context
// ended has returned, even when that call ignores the context.
func TestStartWaitsForInFlightReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		release := make(chan struct{})
		var returned atomic.Bool
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			close(entered)
			<-release // deliberately deaf to ctx
			returned.Store(true)
			return reconcile.Result{}, nil
		})
		c := newController(t, r, reconcile.Options{Workers: 3})
		ctx, cancel := context.WithCancel(t.Context())
		startReturned := make(chan error, 1)
		go func() { startReturned <- c.Start(ctx) }()
		c.Enqueue(keyA)
		<-entered

		cancel()
		synctest.Wait()
		select {
		case err := <-startReturned:
			t.Fatalf("Start returned (%v) while a Reconcile call was in flight", err)
		default:
		}

		close(release)
		synctest.Wait()
		select {
		case err := <-startReturned:
			if err != nil {
				t.Errorf("Start = %v, want nil", err)
			}
			if !returned.Load() {
				t.Error("Start returned before the Reconcile call did")
			}
		default:
			t.Fatal("Start did not return after the last Reconcile call returned")
		}
	})
}

// Keys enqueued before Start are reconciled once it runs, once each; keys
// enqueued after it stopped are ignored without blocking or panicking.
func TestEnqueueBeforeStartAndAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []reconcile.Key
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.Key)
			return reconcile.Result{}, nil
		})
		c := newController(t, r, reconcile.Options{})
		for range 3 {
			c.Enqueue(keyB)
			c.Enqueue(keyA)
		}
		if d := c.Stats().QueueDepth; d != 2 {
			t.Errorf("QueueDepth before Start = %d, want 2", d)
		}
		stop := start(t, c)
		synctest.Wait()
		stop()
		c.Enqueue(keyA)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []reconcile.Key{keyB, keyA}; !equalKeys(got, want) {
			t.Errorf("reconciled %v, want %v (arrival order, once each)", got, want)
		}
	})
}

func equalKeys(a, b []reconcile.Key) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStartTwiceFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newController(t, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}), reconcile.Options{})
		start(t, c)
		synctest.Wait()
		if err := c.Start(t.Context()); !errors.Is(err, reconcile.ErrAlreadyStarted) {
			t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
		}
	})
}

// Once the context ends, keys still queued are left alone and a call that
// returns the context's error is not counted as a failure.
func TestStopLeavesQueuedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		var mu sync.Mutex
		var got []reconcile.Key
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			mu.Lock()
			got = append(got, req.Key)
			mu.Unlock()
			if req.Key == keyA {
				close(entered)
				<-ctx.Done()
				return reconcile.Result{}, ctx.Err()
			}
			return reconcile.Result{}, nil
		})
		c := newController(t, r, reconcile.Options{Workers: 1})
		stop := start(t, c)
		c.Enqueue(keyA)
		<-entered
		c.Enqueue(keyB)
		stop()
		mu.Lock()
		defer mu.Unlock()
		if want := []reconcile.Key{keyA}; !equalKeys(got, want) {
			t.Errorf("reconciled %v, want %v", got, want)
		}
		if s := countsOf(c.Stats()); s != (counts{Reconciles: 1}) {
			t.Errorf("Stats() = %+v, want one reconcile and no error", s)
		}
	})
}

// Durations are measured on the controller's clock and land in the
// histogram bucket whose bound is the first at or above them.
func TestStatsDurationHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		steps := map[reconcile.Key]time.Duration{
			keyA:                      3 * time.Millisecond, // bucket (2.5ms, 5ms]
			keyB:                      5 * time.Millisecond, // bound inclusive: same bucket
			{Kind: "Host", Name: "h"}: time.Minute,          // above every bound
		}
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			clk.Step(steps[req.Key])
			return reconcile.Result{}, nil
		})
		c := newController(t, r, reconcile.Options{Clock: clk})
		start(t, c)
		for k := range steps {
			c.Enqueue(k)
		}
		synctest.Wait()
		h := c.Stats().Duration
		if h.Count != 3 || h.Sum != time.Minute+8*time.Millisecond {
			t.Errorf("Count, Sum = %d, %v; want 3, 1m0.008s", h.Count, h.Sum)
		}
		if len(h.Counts) != len(h.Bounds)+1 {
			t.Fatalf("%d counts for %d bounds, want one more", len(h.Counts), len(h.Bounds))
		}
		for i, n := range h.Counts {
			var want uint64
			switch {
			case i < len(h.Bounds) && h.Bounds[i] == 5*time.Millisecond:
				want = 2
			case i == len(h.Bounds):
				want = 1
			}
			if n != want {
				t.Errorf("Counts[%d] = %d, want %d", i, n, want)
			}
		}
	})
}

// countingProvider is a workqueue.MetricsProvider that counts the adds the
// queue reports under each name.
type countingProvider struct {
	mu   sync.Mutex
	adds map[string]int
}

type addCounter struct {
	p    *countingProvider
	name string
}

func (a addCounter) Inc() {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.adds[a.name]++
}

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

func (p *countingProvider) NewDepthMetric(string) workqueue.GaugeMetric { return noop{} }
func (p *countingProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return addCounter{p: p, name: name}
}
func (p *countingProvider) NewLatencyMetric(string) workqueue.HistogramMetric      { return noop{} }
func (p *countingProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }
func (p *countingProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (p *countingProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (p *countingProvider) NewRetriesMetric(string) workqueue.CounterMetric { return noop{} }

func TestMetricsProviderGetsQueueMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingProvider{adds: map[string]int{}}
		c, err := reconcile.NewController("profile", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}), reconcile.Options{MetricsProvider: p, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		start(t, c)
		c.Enqueue(keyA)
		c.Enqueue(keyB)
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.adds["profile"] != 2 {
			t.Errorf("adds reported = %v, want profile: 2", p.adds)
		}
	})
}

// Failures are logged at error level with the controller, the key and the
// error; a panic's record carries its stack.
func TestFailuresAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			switch req.Key {
			case keyA:
				return reconcile.Result{}, reconcile.TerminalError(errors.New("root is a file"))
			default:
				panic("bad state")
			}
		})
		c, err := reconcile.NewController("workspace", r, reconcile.Options{Logger: log, Clock: newFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, c)
		c.Enqueue(keyA)
		synctest.Wait()
		c.Enqueue(keyB)
		synctest.Wait()
		stop()

		var records []map[string]any
		for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if m["level"] == "ERROR" {
				records = append(records, m)
			}
		}
		if len(records) != 2 {
			t.Fatalf("%d error records, want 2:\n%s", len(records), buf.String())
		}
		for i, want := range []struct{ key, err string }{
			{"Profile/a", "terminal error: root is a file"},
			{"Profile/b", "reconcile panicked: bad state"},
		} {
			r := records[i]
			if r["controller"] != "workspace" || r["key"] != want.key || r["err"] != want.err {
				t.Errorf("record %d = %v, want controller workspace, key %s, err %q", i, r, want.key, want.err)
			}
		}
		if s, _ := records[1]["stack"].(string); !strings.Contains(s, "lifecycle_test.go") {
			t.Errorf("panic record has no stack naming the panicking file: %q", s)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of workers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Unfinished and Longest add up the calls running now, on the
// controller's clock, and fall to zero once they return.
func TestStatsUnfinishedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		release := make(chan struct{})
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			<-release
			return reconcile.Result{}, nil
		})
		c := newController(t, r, reconcile.Options{Clock: clk, Workers: 3})
		start(t, c)
		c.Enqueue(keyA)
		synctest.Wait()
		clk.Step(3 * time.Second)
		c.Enqueue(keyB)
		synctest.Wait()
		clk.Step(2 * time.Second)
		if s := c.Stats(); s.Unfinished != 7*time.Second || s.Longest != 5*time.Second {
			t.Errorf("two calls running 5s and 2s: Unfinished, Longest = %v, %v; want 7s, 5s", s.Unfinished, s.Longest)
		}
		close(release)
		synctest.Wait()
		if s := c.Stats(); s.Unfinished != 0 || s.Longest != 0 {
			t.Errorf("no call running: Unfinished, Longest = %v, %v; want 0, 0", s.Unfinished, s.Longest)
		}
	})
}

// An idle controller, metrics provider and all, holds no ticker or timer
// on its clock: nothing wakes it until a key is enqueued.
func TestIdleControllerSetsNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		p := &countingProvider{adds: map[string]int{}}
		c := newController(t, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}), reconcile.Options{Clock: clk, MetricsProvider: p})
		start(t, c)
		c.Enqueue(keyA)
		synctest.Wait()
		if clk.HasWaiters() {
			t.Error("an idle controller waits on its clock; want no ticker or timer")
		}
	})
}

// A key that keeps failing the same way logs one error line, not one per
// retry; a new cause logs again, and the success after them one line.
func TestRetriesLogOneLinePerCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		var calls atomic.Int64
		r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			switch n := calls.Add(1); {
			case n <= 4:
				return reconcile.Result{}, errors.New("cgroup.procs: permission denied")
			case n <= 7:
				return reconcile.Result{}, errors.New("cgroup.subtree_control: no such file or directory")
			}
			return reconcile.Result{}, nil
		})
		clk := newFakeClock()
		c, err := reconcile.NewController("profile", r, reconcile.Options{Logger: log, Clock: clk, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, c)
		c.Enqueue(keyA)
		for calls.Load() < 8 {
			synctest.Wait()
			clk.Step(time.Millisecond)
		}
		synctest.Wait()
		stop()

		var errs, recovered int
		for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch {
			case m["level"] == "ERROR":
				errs++
			case m["msg"] == "reconcile succeeded after failures":
				recovered++
			}
		}
		if errs != 2 || recovered != 1 {
			t.Errorf("%d error lines and %d recovery lines for 7 failures of 2 causes, want 2 and 1:\n%s", errs, recovered, buf.String())
		}
	})
}
