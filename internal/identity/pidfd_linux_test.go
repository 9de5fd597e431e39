package identity

import (
	"errors"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestNotReaped(t *testing.T) {
	tests := []struct {
		name   string
		state  func(t *testing.T, cmd *exec.Cmd) // brings the started child into the state
		reaped bool
	}{
		{name: "running", state: func(*testing.T, *exec.Cmd) {}},
		{name: "zombie", state: func(t *testing.T, cmd *exec.Cmd) {
			// Killed, not reaped. Wait with WNOWAIT returns once it has
			// exited and leaves it a zombie.
			cmd.Process.Kill()
			var info unix.Siginfo
			if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "reaped", reaped: true, state: func(t *testing.T, cmd *exec.Cmd) {
			cmd.Process.Kill()
			cmd.Wait()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := start(t, exec.Command("sleep", "60"))
			pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pidfd)
			tc.state(t, cmd)
			err = NotReaped(pidfd)
			if tc.reaped && !errors.Is(err, ErrNoProcess) || !tc.reaped && err != nil {
				t.Errorf("NotReaped(pidfd of %s child) = %v, want reaped %v", tc.name, err, tc.reaped)
			}
		})
	}
}
