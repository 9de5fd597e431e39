package testutil

import (
	"os"
	"testing"
	"time"
)

// RequireRoot skips t unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// Deadline is how long a test waits for an event before it fails.
const Deadline = 10 * time.Second

// Eventually waits until cond returns true, checking again whenever wake
// delivers, and fails t after Deadline. Use it with a channel fed by the
// event being waited for, never with a timer.
func Eventually[T any](t testing.TB, wake <-chan T, cond func() bool, what string) {
	t.Helper()
	deadline := time.NewTimer(Deadline)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-wake:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", Deadline, what)
		}
	}
}
