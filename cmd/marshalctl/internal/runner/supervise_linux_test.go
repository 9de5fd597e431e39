package runner

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// A process that dieBy ends dies by the signal, never by the exit right
// after the call: the signal is taken before anything after it runs.
func TestDieByEndsTheProcessByTheSignal(t *testing.T) {
	for i := range 50 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), dieByTERM+"=1")
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run %d: %v, want death by SIGTERM", i, err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("run %d ended with %v, want death by SIGTERM", i, ee)
		}
	}
}
