package interrupt

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// Importing the package catches the signals: the test process survives
// them, and they cancel the context.
func TestNotifyContextIsCancelledBySignals(t *testing.T) {
	waitReady(t)
	for _, tc := range []struct {
		name   string
		signal syscall.Signal
	}{
		{"sigint", syscall.SIGINT},
		{"sigterm", syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, stop := NotifyContext(context.Background())
			defer stop()
			if err := syscall.Kill(os.Getpid(), tc.signal); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(testutil.Deadline):
				t.Fatalf("%v did not cancel the context after %v", tc.signal, testutil.Deadline)
			}
		})
	}
}

func TestNotifyContextStop(t *testing.T) {
	ctx, stop := NotifyContext(context.Background())
	stop()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after stop, ctx.Err() = %v, want context.Canceled", ctx.Err())
	}
	// The watching goroutine is gone; the runtime's and os/signal's own,
	// which last the process, are not the package's.
	goleak.VerifyNone(t, goleak.IgnoreTopFunction("os/signal.signal_recv"),
		goleak.IgnoreAnyFunction("runtime.ensureSigM.func1"))
}

func TestNotifyContextFollowsItsParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := NotifyContext(parent)
	defer stop()
	cancel()
	select {
	case <-ctx.Done():
	case <-time.After(testutil.Deadline):
		t.Fatalf("the parent's cancellation did not reach the context after %v", testutil.Deadline)
	}
}

func waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-Caught{}.Ready():
	case <-time.After(testutil.Deadline):
		t.Fatalf("signals not caught after %v", testutil.Deadline)
	}
}
