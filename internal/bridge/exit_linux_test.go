package bridge

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/testutil"
)

func pidfdOf(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Skipf("needs pidfd_open: %v", err)
	}
	return fd
}

// The context ends when the process exits, and not before.
func TestUntilExitEndsWithTheProcess(t *testing.T) {
	child := testutil.StartChild(t, exec.Command("cat"))
	ctx, stop, err := UntilExit(t.Context(), pidfdOf(t, child.PID()))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	child.Say(t, "still here")
	if got := child.Line(t); got != "still here" {
		t.Fatalf("child said %q", got)
	}
	if ctx.Err() != nil {
		t.Fatal("the context ended while the process runs")
	}
	child.Kill()
	select {
	case <-ctx.Done():
	case <-time.After(testutil.Deadline):
		t.Fatal("the context did not end when the process exited")
	}
}

// stop ends the wait of a process that runs on, and returns once the
// goroutine is gone.
func TestUntilExitStops(t *testing.T) {
	child := testutil.StartChild(t, exec.Command("cat"))
	ctx, stop, err := UntilExit(t.Context(), pidfdOf(t, child.PID()))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if ctx.Err() == nil {
		t.Fatal("the context runs on after stop")
	}
	if child.Exited() {
		t.Fatal("stop touched the process")
	}
}
