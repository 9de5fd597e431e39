package launch

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestExitSaysHowTheLaunchEnded(t *testing.T) {
	for _, tc := range []struct {
		exit   Exit
		want   string
		failed bool
	}{
		{Exit{Known: true, Status: 0}, "exited with status 0", false},
		{Exit{Known: true, Status: 3 << 8}, "exited with status 3", true},
		{Exit{Known: true, Status: syscall.WaitStatus(syscall.SIGKILL)}, "killed by signal 9 (killed)", true},
		{Exit{Known: true, Status: syscall.WaitStatus(syscall.SIGSEGV) | 0x80}, "killed by signal 11 (segmentation fault), core dumped", true},
		{Exit{}, "exit status not known", false},
		{Exit{Known: true, Status: 0, OOMKills: 1}, "exited with status 0; the kernel OOM-killed 1 process of its scope", true},
		{Exit{OOMKills: 2}, "exit status not known; the kernel OOM-killed 2 processes of its scope", true},
	} {
		if got := tc.exit.String(); got != tc.want {
			t.Errorf("%+v says %q, want %q", tc.exit, got, tc.want)
		}
		if got := tc.exit.Failed(); got != tc.failed {
			t.Errorf("%+v failed = %v, want %v", tc.exit, got, tc.failed)
		}
	}
}

// The wait status of a pinned process that is not marshald's child is
// read while it is a zombie its parent has not reaped, and after.
func TestExitStatusOfAPinnedProcess(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read x; exit 3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p, err := Pin(cmd.Process.Pid, uint32(os.Getuid()), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if ws, ok := p.ExitStatus(); ok {
		t.Fatalf("ExitStatus of a running process = %v, true; want false", ws)
	}
	io.WriteString(stdin, "go\n")
	if err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ws, ok := p.ExitStatus(); !ok || !ws.Exited() || ws.ExitStatus() != 3 {
		t.Errorf("ExitStatus of the zombie = %v (exited %v, status %d), %v; want exited 3", ws, ws.Exited(), ws.ExitStatus(), ok)
	}
	cmd.Wait()
	if ws, ok := p.ExitStatus(); !ok || !ws.Exited() || ws.ExitStatus() != 3 {
		t.Errorf("ExitStatus once reaped = %v, %v; want exited 3", ws, ok)
	}
}

// Settle keeps how a launch ended until it is forgotten: the signal that
// killed its caller.
func TestEndedKeepsTheCallersEnd(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationNone, 1)
	h.start()
	c, plan := h.launch(h.request("web"))
	if _, ok := h.l.Ended(plan.ID); ok {
		t.Fatal("Ended of a running launch = true")
	}
	c.exit(t)
	id, _ := scope.ParseScopeName(plan.Scope)
	sc := cgroup.Scope{Name: plan.Scope, Profile: id.Profile, ID: plan.ID}
	h.l.mu.Lock()
	sc.Path = h.l.launches[plan.ID].path
	h.l.mu.Unlock()
	var serr error
	testutil.Eventually(t, h.changed, func() bool {
		var over bool
		over, _, serr = h.l.Settle(t.Context(), sc, time.Time{})
		return over || serr != nil
	}, "the launch to be over")
	if serr != nil {
		t.Fatal(serr)
	}
	end, ok := h.l.Ended(plan.ID)
	if !ok || !end.Known || !end.Status.Signaled() || end.Status.Signal() != syscall.SIGKILL || end.OOMKills != 0 {
		t.Errorf("Ended = %+v, %v; want killed by SIGKILL, no OOM kill", end, ok)
	}
	if err := h.backend.RemoveScope(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	if err := h.l.Forget(t.Context(), plan.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.l.Ended(plan.ID); ok {
		t.Error("Ended of a forgotten launch = true")
	}
}
