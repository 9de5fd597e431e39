package acceptloop

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// failing is a listener whose accepts fail with errs, in turn, and then
// succeed with one end of a pipe: the faults a real listener shows only
// when the host runs out of file descriptors.
type failing struct {
	net.Listener
	errs []error
}

func (f *failing) Accept() (net.Conn, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	c, _ := net.Pipe()
	return c, nil
}

func TestATemporaryFailureIsWaitedOut(t *testing.T) {
	ln := &failing{errs: []error{syscall.EMFILE, syscall.ENFILE}}
	var waits []time.Duration
	served := 0
	err := Run(context.Background(), ln, func(err error, wait time.Duration) { waits = append(waits, wait) }, func(c net.Conn) bool {
		c.Close()
		served++
		return served < 2
	})
	if err != nil || served != 2 {
		t.Fatalf("Run = %v after serving %d, want nil after 2", err, served)
	}
	if len(waits) != 2 || waits[0] != MinBackoff || waits[1] != 2*MinBackoff {
		t.Errorf("waits = %v, want %v then %v", waits, MinBackoff, 2*MinBackoff)
	}
}

func TestAFailureForGoodIsReturned(t *testing.T) {
	bad := errors.New("listener broken")
	err := Run(context.Background(), &failing{errs: []error{bad}}, nil, func(net.Conn) bool {
		t.Error("served a connection")
		return true
	})
	if !errors.Is(err, bad) {
		t.Errorf("Run = %v, want %v", err, bad)
	}
}

func TestAnEndedContextEndsTheLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, &failing{errs: []error{net.ErrClosed}}, nil, nil); err != nil {
		t.Errorf("Run after its context ended = %v, want nil", err)
	}
}
