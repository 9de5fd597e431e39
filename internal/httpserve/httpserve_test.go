package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeUntilTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, ln, time.Minute, nil) }()
	reqDone := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err == nil {
			resp.Body.Close()
		}
		reqDone <- err
	}()
	<-started
	cancel()
	// Shutting down waits for the request in flight: closing it instead
	// would fail it below.
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v, want nil after cancellation", err)
	}
	if err := <-reqDone; err != nil {
		t.Fatalf("the request in flight failed: %v", err)
	}
	testutil.ListenerClosed(t, ln)
}

func TestServeForcesAfterTheTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	stuck := make(chan struct{})
	defer close(stuck)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var forced error
	go func() { done <- Serve(ctx, srv, ln, 10*time.Millisecond, func(err error) { forced = err }) }()
	go http.Get("http://" + ln.Addr().String())
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	if !errors.Is(forced, context.DeadlineExceeded) {
		t.Errorf("onForced got %v, want the shutdown's deadline", forced)
	}
}

func TestServeReportsAFailingListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := Serve(t.Context(), &http.Server{}, ln, time.Second, nil); err == nil {
		t.Fatal("Serve on a closed listener = nil, want its error")
	}
}
