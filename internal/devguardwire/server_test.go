package devguardwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// closedDaemon answers nothing: the sessions of these tests never get
// past hello. marshald's own Daemon is tested through the socket it
// serves (package test).
type closedDaemon struct{}

var errClosed = errors.New("no daemon")

func (closedDaemon) Capabilities() []Capability { return nil }
func (closedDaemon) AuthenticateConsumer(string, string, Secret) (admission.Role, error) {
	return "", admission.ErrUnauthorized
}
func (closedDaemon) AuthenticateAdministrator(Secret) error { return admission.ErrUnauthorized }
func (closedDaemon) Status() Status                         { return Status{} }
func (closedDaemon) Register(context.Context, string, string, string, admission.Peer) (admission.Principal, error) {
	return admission.Principal{}, errClosed
}
func (closedDaemon) Registered(string, string, string) (admission.Principal, bool) {
	return admission.Principal{}, false
}
func (closedDaemon) Admit(context.Context, admission.Principal, admission.AttemptKey, string, admission.Intent) (admission.Record, error) {
	return admission.Record{}, errClosed
}
func (closedDaemon) BeginLaunch(context.Context, admission.Principal, admission.AttemptKey) (admission.Launch, error) {
	return admission.Launch{}, errClosed
}
func (closedDaemon) Lookup(context.Context, admission.Principal, admission.AttemptKey) (admission.Record, error) {
	return admission.Record{}, errClosed
}
func (closedDaemon) Cancel(context.Context, admission.Principal, admission.AttemptKey) (admission.Record, error) {
	return admission.Record{}, errClosed
}
func (closedDaemon) AbandonLaunch(context.Context, admission.Principal, admission.AttemptKey, admission.AbandonReason) (admission.Record, error) {
	return admission.Record{}, errClosed
}
func (closedDaemon) Observe(context.Context, admission.Principal, admission.AttemptKey) (admission.Record, error) {
	return admission.Record{}, errClosed
}
func (closedDaemon) Terminate(context.Context, admission.Principal, admission.AttemptKey, syscall.Signal) (admission.Record, Termination, error) {
	return admission.Record{}, Termination{}, errClosed
}
func (closedDaemon) Launch(context.Context, admission.Principal, admission.AttemptKey, admission.Permit, *launch.Process) (admission.Run, error) {
	return admission.Run{}, errClosed
}

// serve runs a Server with frame deadline deadline on a socket in a
// temporary directory until the test ends.
func serve(t *testing.T, deadline time.Duration) string {
	t.Helper()
	path := filepath.Join(testutil.ShortDir(t), "dg.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Daemon: closedDaemon{}, FrameDeadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return path
}

// closedWithoutAnswer reports whether the server ends c without writing
// a byte.
func closedWithoutAnswer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testutil.Deadline))
	var b [1]byte
	n, err := c.Read(b[:])
	return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

func helloFrame(t *testing.T) []byte {
	t.Helper()
	f, err := appendFrame(nil, []byte(`{"version":1,"request_id":1,"body":{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1,"required":[]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// With a deadline long enough to hold 32 sessions on any machine, the
// 33rd is closed at once, unread, and the 32 are all served.
func TestServerServesAtMost32Sessions(t *testing.T) {
	path := serve(t, time.Minute)
	var open []net.Conn
	for range MaxSessions {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	extra, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.Write(helloFrame(t))
	if !closedWithoutAnswer(t, extra) {
		t.Fatal("a 33rd session was served")
	}
	for i, c := range open {
		if _, err := c.Write(helloFrame(t)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(testutil.Deadline))
		if _, err := readFrame(c, nil); err != nil {
			t.Errorf("session %d: %v", i+1, err)
		}
	}
}

// A session that says nothing is closed at its frame deadline, unread:
// the deadline covers the idle wait.
func TestServerClosesAnIdleSession(t *testing.T) {
	path := serve(t, FrameDeadline)
	// Taken before the connection exists, so before the server accepts
	// it and starts its deadline: however late either side runs, the
	// close comes FrameDeadline after this at the earliest.
	start := time.Now()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedWithoutAnswer(t, c) {
		t.Fatal("an idle session was not closed")
	}
	if d := time.Since(start); d < FrameDeadline {
		t.Errorf("closed after %s, before the deadline", d)
	}
}

// Every error the Daemon returns has its definite code, and only what
// leaves the outcome unknown is resource_control_unavailable.
func TestErrorsMapToDevGuardsCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code Code
	}{
		{admission.ErrInvalidRequest, CodeInvalidRequest},
		{admission.ErrUnauthorized, CodeUnauthorized},
		{launch.ErrNotOwnersChild, CodeUnauthorized},
		{admission.ErrNotFound, CodeNotFound},
		{admission.ErrAttemptConflict, CodeAttemptConflict},
		{admission.ErrInvalidTransition, CodeInvalidTransition},
		{launch.ErrClaimed, CodeInvalidTransition},
		{admission.ErrInstancesFull, CodeResourceUnavailable},
		{admission.ErrJournalFailed, CodeResourceUnavailable},
		{admission.ErrEvidence, CodeResourcePolicyUnsupported},
		{admission.ErrUnavailable, CodeResourceControlUnavailable},
		{admission.ErrClosed, CodeResourceControlUnavailable},
		{context.DeadlineExceeded, CodeResourceControlUnavailable},
		{errors.New("anything else"), CodeResourceControlUnavailable},
	} {
		wrapped := fmt.Errorf("attempt x: %w", tc.err)
		if got := errorOf(wrapped); got.Code != tc.code || strings.Contains(got.Message, "attempt x") {
			t.Errorf("errorOf(%v) = %+v, want %s with a message of its own", tc.err, got, tc.code)
		}
	}
}
