package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve answers connections on ln with srv until ctx ends, then stops
// accepting, gives the requests in flight shutdownTimeout to finish,
// closes what is left and returns nil. It closes ln. It returns an error
// only when ln fails first. onForced, when set, is told that requests
// had to be closed.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, shutdownTimeout time.Duration, onForced func(error)) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if onForced != nil {
			onForced(err)
		}
		srv.Close()
	}
	<-done // http.ErrServerClosed, once Serve has returned
	return nil
}
