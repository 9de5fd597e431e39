package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

// scripted is a reconciler whose behaviour is chosen by the key's name:
//
//   - fail-once fails its first call, then succeeds;
//   - terminal fails with a terminal error;
//   - panic-once panics on its first call, then succeeds;
//   - requeue succeeds and asks to run again in an hour;
//   - barrier-* blocks until the test sends on release;
//   - anything else succeeds.
//
// Every call is announced on calls as it starts.
type scripted struct {
	calls   chan reconcile.Key
	release chan struct{}

	// mu guards seen.
	mu   sync.Mutex
	seen map[string]int
}

func newScripted() *scripted {
	return &scripted{calls: make(chan reconcile.Key, 100), release: make(chan struct{}), seen: map[string]int{}}
}

func (s *scripted) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	s.seen[req.Key.Name]++
	n := s.seen[req.Key.Name]
	s.mu.Unlock()
	s.calls <- req.Key
	switch {
	case strings.HasPrefix(req.Key.Name, "barrier"):
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	case req.Key.Name == "fail-once" && n == 1:
		return reconcile.Result{}, errors.New("transient failure")
	case req.Key.Name == "terminal":
		return reconcile.Result{}, reconcile.TerminalError(errors.New("spec cannot work"))
	case req.Key.Name == "panic-once" && n == 1:
		panic("reconciler bug")
	case req.Key.Name == "requeue":
		return reconcile.Result{RequeueAfter: time.Hour}, nil
	}
	return reconcile.Result{}, nil
}

func (s *scripted) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[name]
}

// waitCalls waits until every name was called at least as often as want
// says.
func (s *scripted) waitCalls(t *testing.T, want map[string]int) {
	t.Helper()
	testutil.Eventually(t, s.calls, func() bool {
		for name, n := range want {
			if s.count(name) < n {
				return false
			}
		}
		return true
	}, "the reconcile calls")
}

// startController runs c until the test ends and waits for it.
func startController(t *testing.T, c *reconcile.Controller, s *scripted) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
}

func key(name string) reconcile.Key { return reconcile.Key{Kind: "Profile", Name: name} }

// TestControllerAndQueueMetrics runs two real controllers, one of which
// fails, panics and requeues, and checks that each controller and work
// queue metric appears in a scrape and counts what happened.
func TestControllerAndQueueMetrics(t *testing.T) {
	wq := NewWorkqueue()
	opts := reconcile.Options{
		Workers:         1, // a call starts only after the one before was counted
		BackoffBase:     time.Millisecond,
		MetricsProvider: wq,
		Logger:          slog.New(slog.DiscardHandler),
	}
	okR, flakyR := newScripted(), newScripted()
	okC, err := reconcile.NewController("ok", okR, opts)
	if err != nil {
		t.Fatal(err)
	}
	flakyC, err := reconcile.NewController("flaky", flakyR, opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Controllers: []Controller{okC, flakyC}, Workqueue: wq})
	if err != nil {
		t.Fatal(err)
	}
	url := server(t, m)

	before := get(t, url)
	for _, c := range []string{"ok", "flaky"} {
		if got := before.value(t, "marshal_controller_reconciles_total", "controller", c); got != 0 {
			t.Errorf("before any call: reconciles{controller=%q} = %v, want 0", c, got)
		}
		if got := before.value(t, "marshal_workqueue_longest_running_processor_seconds", "name", c); got != 0 {
			t.Errorf("before any call: longest running{name=%q} = %v, want 0", c, got)
		}
	}
	if _, ok := before["marshal_workqueue_adds_total"]; ok {
		t.Errorf("before the queues exist: marshal_workqueue_adds_total is exported")
	}

	startController(t, okC, okR)
	startController(t, flakyC, flakyR)
	okC.Enqueue(key("a"))
	for _, name := range []string{"fail-once", "terminal", "panic-once", "requeue"} {
		flakyC.Enqueue(key(name))
	}
	flakyR.waitCalls(t, map[string]int{"fail-once": 2, "terminal": 1, "panic-once": 2, "requeue": 1})
	okR.waitCalls(t, map[string]int{"a": 1})
	// With one worker, a barrier's call starts only once every earlier
	// call was counted; while it blocks, two more keys wait in the queue.
	flakyC.Enqueue(key("barrier-1"))
	okC.Enqueue(key("barrier-1"))
	flakyR.waitCalls(t, map[string]int{"barrier-1": 1})
	okR.waitCalls(t, map[string]int{"barrier-1": 1})
	flakyC.Enqueue(key("x"))
	flakyC.Enqueue(key("y"))

	during := get(t, url)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"marshal_controller_reconciles_total", []string{"controller", "flaky"}, 6},
		{"marshal_controller_reconciles_total", []string{"controller", "ok"}, 1},
		{"marshal_controller_reconcile_errors_total", []string{"controller", "flaky", "kind", "error"}, 1},
		{"marshal_controller_reconcile_errors_total", []string{"controller", "flaky", "kind", "terminal"}, 1},
		{"marshal_controller_reconcile_errors_total", []string{"controller", "flaky", "kind", "panic"}, 1},
		{"marshal_controller_reconcile_errors_total", []string{"controller", "ok", "kind", "error"}, 0},
		{"marshal_controller_requeues_total", []string{"controller", "flaky"}, 1},
		{"marshal_controller_active_workers", []string{"controller", "flaky"}, 1},
		{"marshal_controller_reconcile_duration_seconds", []string{"controller", "flaky"}, 6},
		{"marshal_controller_reconcile_duration_seconds", []string{"controller", "ok"}, 1},
		// fail-once, terminal, panic-once, requeue, their two retries,
		// the barrier, x and y.
		{"marshal_workqueue_adds_total", []string{"name", "flaky"}, 9},
		{"marshal_workqueue_adds_total", []string{"name", "ok"}, 2},
		// The retries of fail-once and panic-once, and requeue's
		// RequeueAfter: the queue counts every delayed add.
		{"marshal_workqueue_retries_total", []string{"name", "flaky"}, 3},
		{"marshal_workqueue_depth", []string{"name", "flaky"}, 2},
		{"marshal_workqueue_depth", []string{"name", "ok"}, 0},
		// Every key taken so far (the barrier included)...
		{"marshal_workqueue_queue_duration_seconds", []string{"name", "flaky"}, 7},
		// ...and every key done (the barrier is not).
		{"marshal_workqueue_work_duration_seconds", []string{"name", "flaky"}, 6},
	}
	for _, c := range checks {
		if got := during.value(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%s = %v, want %v", c.name, labelString(c.labels), got, c.want)
		}
	}
	during.typeOf(t, "marshal_controller_reconcile_duration_seconds", dto.MetricType_HISTOGRAM)
	during.typeOf(t, "marshal_workqueue_queue_duration_seconds", dto.MetricType_HISTOGRAM)
	during.typeOf(t, "marshal_workqueue_work_duration_seconds", dto.MetricType_HISTOGRAM)
	during.typeOf(t, "marshal_workqueue_unfinished_work_seconds", dto.MetricType_GAUGE)
	during.typeOf(t, "marshal_workqueue_longest_running_processor_seconds", dto.MetricType_GAUGE)
	// Each controller's one worker is inside its barrier call.
	for _, c := range []string{"ok", "flaky"} {
		unfinished := during.value(t, "marshal_workqueue_unfinished_work_seconds", "name", c)
		longest := during.value(t, "marshal_workqueue_longest_running_processor_seconds", "name", c)
		if longest <= 0 || unfinished != longest {
			t.Errorf("one call running in %s: unfinished, longest = %v, %v; want equal and > 0", c, unfinished, longest)
		}
	}
	if h := during.find("marshal_controller_reconcile_duration_seconds", "controller", "flaky").GetHistogram(); h.GetSampleSum() <= 0 {
		t.Errorf("reconcile duration sum of flaky = %v, want > 0", h.GetSampleSum())
	}

	// Releasing the barrier lets it, x and y finish.
	flakyR.release <- struct{}{}
	okR.release <- struct{}{}
	flakyC.Enqueue(key("barrier-2"))
	flakyR.waitCalls(t, map[string]int{"x": 1, "y": 1, "barrier-2": 1})

	after := get(t, url)
	if got := after.value(t, "marshal_controller_reconciles_total", "controller", "flaky"); got != 9 {
		t.Errorf("after the barrier, x and y: reconciles{flaky} = %v, want 9", got)
	}
	if got := after.value(t, "marshal_workqueue_depth", "name", "flaky"); got != 0 {
		t.Errorf("after the queue drained: depth{flaky} = %v, want 0", got)
	}
	if got := after.value(t, "marshal_controller_reconcile_errors_total", "controller", "flaky", "kind", "error"); got != 1 {
		t.Errorf("after successes only: errors{flaky,error} = %v, want still 1", got)
	}
}

func TestHistogramConversion(t *testing.T) {
	tests := []struct {
		name        string
		in          reconcile.Histogram
		wantCount   uint64
		wantSum     float64
		wantBuckets map[float64]uint64
	}{
		{
			name:        "empty",
			in:          reconcile.Histogram{Bounds: []time.Duration{time.Millisecond, time.Second}, Counts: []uint64{0, 0, 0}},
			wantBuckets: map[float64]uint64{0.001: 0, 1: 0},
		},
		{
			name: "cumulative_with_overflow",
			in: reconcile.Histogram{Count: 6, Sum: 12 * time.Second,
				Bounds: []time.Duration{time.Millisecond, time.Second}, Counts: []uint64{2, 1, 3}},
			wantCount: 6, wantSum: 12,
			wantBuckets: map[float64]uint64{0.001: 2, 1: 3},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			count, sum, buckets := histogram(tc.in)
			if count != tc.wantCount || sum != tc.wantSum || len(buckets) != len(tc.wantBuckets) {
				t.Fatalf("histogram(%+v) = %d, %v, %v; want %d, %v, %v", tc.in, count, sum, buckets, tc.wantCount, tc.wantSum, tc.wantBuckets)
			}
			for b, n := range tc.wantBuckets {
				if buckets[b] != n {
					t.Errorf("bucket le=%v = %d, want %d", b, buckets[b], n)
				}
			}
		})
	}
}

// stats is a Controller whose Stats the test sets: the real counters
// cannot be made to show a torn snapshot on demand.
type stats struct {
	mu sync.Mutex
	s  reconcile.Stats
}

func (s *stats) Name() string { return "torn" }

func (s *stats) Stats() reconcile.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s
}

func (s *stats) set(errs, panics uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s.Errors, s.s.Panics = errs, panics
}

// TestRetriedErrorsNeverDecrease: Stats reads Errors and Panics one after
// the other, so a panic being recorded can show as one more panic than
// the errors that contain it; the exported error counter must not dip.
func TestRetriedErrorsNeverDecrease(t *testing.T) {
	s := &stats{}
	m, err := New(Options{Controllers: []Controller{s}})
	if err != nil {
		t.Fatal(err)
	}
	url := server(t, m)
	steps := []struct {
		errs, panics uint64
		want         float64
	}{
		{errs: 5, panics: 0, want: 5},
		{errs: 5, panics: 1, want: 5}, // torn: the panic's error not yet counted
		{errs: 6, panics: 1, want: 5},
		{errs: 8, panics: 1, want: 7},
		{errs: 0, panics: 1, want: 7}, // torn beyond: never below zero, never down
	}
	for _, st := range steps {
		s.set(st.errs, st.panics)
		got := get(t, url).value(t, "marshal_controller_reconcile_errors_total", "controller", "torn", "kind", "error")
		if got != st.want {
			t.Errorf("Errors=%d Panics=%d: errors{kind=error} = %v, want %v", st.errs, st.panics, got, st.want)
		}
	}
}
