package acceptloop

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// Backoff bounds the wait after a temporary failure: it starts at
// MinBackoff and doubles up to MaxBackoff while failures repeat.
const (
	MinBackoff = 5 * time.Millisecond
	MaxBackoff = time.Second
)

// Run accepts connections on ln and hands each to serve until ctx ends
// or serve reports false, and then returns nil; it returns the error of
// an accept that failed for good. Before waiting out a temporary
// failure it tells retrying, when not nil, the error and the wait.
func Run(ctx context.Context, ln net.Listener, retrying func(err error, wait time.Duration), serve func(net.Conn) bool) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !temporary(err) {
				return err
			}
			backoff = min(max(2*backoff, MinBackoff), MaxBackoff)
			if retrying != nil {
				retrying(err, backoff)
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		backoff = 0
		if !serve(c) {
			return nil
		}
	}
}

// temporary reports whether an accept that failed with err may succeed
// when tried again.
func temporary(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
