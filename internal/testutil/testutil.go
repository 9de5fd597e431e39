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

// QuietMoment is an idle time longer than an RCU grace period on any
// kernel configuration: after it, the next move of a process between
// cgroups waits one out, as a launch on a quiet machine does. A benchmark
// that idles for it measures that condition; it waits for no event (the
// kernel tells no one when a grace period has passed).
const QuietMoment = 60 * time.Millisecond

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
