package testutil

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// ListenerClosed fails t unless ln was closed. It asks the listener
// itself: dialing its address instead would reach whatever else on the
// host took the freed port since, and fail a correct server.
func ListenerClosed(t testing.TB, ln net.Listener) {
	t.Helper()
	if err := checkClosed(ln); err != nil {
		t.Error(err)
	}
}

func checkClosed(ln net.Listener) error {
	d, ok := ln.(interface{ SetDeadline(time.Time) error })
	if !ok {
		return fmt.Errorf("%T has no deadline to ask it with", ln)
	}
	// An open listener's Accept then returns at once, with a timeout; a
	// closed one refuses the deadline and the Accept alike.
	d.SetDeadline(time.Now())
	c, err := ln.Accept()
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("the listener on %v is still open: Accept = %v", ln.Addr(), err)
	}
	return nil
}
