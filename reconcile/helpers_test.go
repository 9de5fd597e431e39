package reconcile_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/reconcile"
)

// deadline is how long a test waits for an event before it fails. (The
// engine needs none of internal/testutil's host helpers, so it does not
// import them.)
const deadline = 10 * time.Second

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newController(t testing.TB, r reconcile.Reconciler, o reconcile.Options) *reconcile.Controller {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	c, err := reconcile.NewController("test", r, o)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	return c
}

// start runs c.Start in a goroutine and returns a function that cancels it
// and waits for Start to return; the same is done at cleanup if the test
// did not. Start must return nil.
func start(t testing.TB, c *reconcile.Controller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Start = %v, want nil", err)
				}
			case <-time.After(deadline):
				t.Errorf("Start did not return %v after cancel", deadline)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// recv returns the next value from ch, failing t after the deadline.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out after %v waiting for %s", deadline, what)
		panic("unreachable")
	}
}

// epoch is the fake clocks' starting time.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newFakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(epoch) }
