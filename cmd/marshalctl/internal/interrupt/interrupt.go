package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signals are what NotifyContext turns into a cancellation.
var signals = []os.Signal{os.Interrupt, syscall.SIGTERM}

var (
	// ignored are the signals the process started ignoring, read before
	// they were caught.
	ignored []os.Signal
	// caught receives the signals once ready is closed.
	caught = make(chan os.Signal, 1)
	ready  = make(chan struct{})
)

// init starts catching. Packages are initialised in import path order
// once their imports are: this one, which needs only os/signal, comes
// before cobra, net/http and the YAML parser, whose initialisation the
// catching then overlaps.
func init() {
	for _, sig := range signals {
		if signal.Ignored(sig) {
			ignored = append(ignored, sig)
		}
	}
	// Owned by the package: it ends once the signals are caught, and
	// ready says so.
	go func() {
		signal.Notify(caught, signals...)
		close(ready)
	}()
}

// Caught is the process's SIGINT and SIGTERM as this package catches
// them.
type Caught struct{}

// Ready is closed once the signals are caught: from then on they cancel
// the context NotifyContext returned instead of ending the process.
func (Caught) Ready() <-chan struct{} { return ready }

// Restore gives the signals back the dispositions the process started
// with, for a program it is about to exec: exec resets a caught signal
// to its default, so only an ignored one needs ignoring again. The
// runtime reports an inherited SIG_IGN for SIGINT only; SIGTERM reaches
// the program with its default. Call it after Ready is closed.
func (Caught) Restore() {
	if len(ignored) > 0 {
		signal.Ignore(ignored...)
	}
}

// NotifyContext returns a copy of parent that is cancelled by the first
// SIGINT or SIGTERM, and stop, which cancels it and waits for the
// goroutine that watches. The signals stay caught: marshalctl exits once
// its command is done. Contexts may follow one another, but not overlap.
func NotifyContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-caught:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-done
	}
}
