package test

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

// endedBy returns the signal that ended a's run, or fails t.
func endedBy(t *testing.T, a *agent) syscall.Signal {
	t.Helper()
	a.wait(t)
	var ee *exec.ExitError
	if !errors.As(a.err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("the agent ended with %v, not by a signal", a.err)
	}
	return ee.Sys().(syscall.WaitStatus).Signal()
}

// marshalctl stop agent sends SIGTERM, then SIGKILL after the grace
// period; kill sends SIGKILL at once. Each returns once the agent is
// gone, and the reservation is released as for any agent that ends.
func TestStopAndKillAgent(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required"}), "web")
	tests := []struct {
		name   string
		script string
		args   []string
		done   string
		signal syscall.Signal
	}{
		{"stop_a_polite_agent", `touch m-$$; exec sleep 600`, []string{"stop", "--grace", "10m"}, "stopped", syscall.SIGTERM},
		{"stop_an_agent_that_ignores_sigterm", `trap "" TERM; touch m-$$; sleep 600 & wait`, []string{"stop", "--grace", "200ms"}, "stopped", syscall.SIGKILL},
		{"kill", `trap "" TERM; touch m-$$; exec sleep 600`, []string{"kill"}, "killed", syscall.SIGKILL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := d.startRun("-w", "web", "--", "sh", "-c", tc.script)
			if !a.startedOrEnded(t, root) {
				_, stderr := a.output()
				t.Fatalf("the agent did not start: %s", stderr)
			}
			scopes := d.scopeDirs()
			if len(scopes) != 1 {
				t.Fatalf("scopes %q, want the agent's alone", scopes)
			}
			r := d.ctl(append(append(tc.args[:1:1], "agent", scopes[0]), tc.args[1:]...)...)
			if r.code != 0 || r.stdout != "agent/"+scopes[0]+" "+tc.done+"\n" {
				t.Errorf("%v: exit %d, %q %q", tc.args, r.code, r.stdout, r.stderr)
			}
			if sig := endedBy(t, a); sig != tc.signal {
				t.Errorf("the agent ended by %v, want %v", sig, tc.signal)
			}
			d.waitSettled(t)
		})
	}
	if r := d.ctl("stop", "agent", "marshal-coder-00000000000000000000000000000009.scope"); r.code != 1 {
		t.Errorf("stop of an agent that does not exist: exit %d, %q; want 1", r.code, r.stderr)
	}
}
