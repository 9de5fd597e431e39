package agentstop

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// agent is a real process in a scope of the fake tree.
type agent struct {
	cmd   *exec.Cmd
	scope cgroup.Scope
	done  chan struct{}
	err   error
}

// startAgent runs script in sh, in a new scope, once it printed its first
// line (so that its traps are set).
func startAgent(t *testing.T, f *cgrouptest.Fake, script string) *agent {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{cmd: cmd, done: make(chan struct{})}
	_, err = bufio.NewReader(out).ReadString('\n')
	go func() { a.err = cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-a.done })
	if err != nil {
		t.Fatal(err)
	}
	if a.scope, _, err = f.CreateScope(t.Context(), "coder", scope.NewID(), cmd.Process.Pid, cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	return a
}

// signal waits for the agent to end and returns the signal that ended it.
func (a *agent) signal(t *testing.T) syscall.Signal {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(testutil.Deadline):
		t.Fatal("the agent did not end")
	}
	var ee *exec.ExitError
	if !errors.As(a.err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("the agent ended with %v, not by a signal", a.err)
	}
	return ee.Sys().(syscall.WaitStatus).Signal()
}

func (a *agent) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// An agent that ignores SIGTERM is killed when its grace period ends, not
// before.
func TestStopKillsAfterTheGracePeriod(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	st := New(f, clk, nil)
	a := startAgent(t, f, `trap "" TERM; echo ready; exec sleep 600`)

	if err := st.Stop(t.Context(), a.scope, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if f.Calls(cgrouptest.OpTerminate) != 1 || f.Calls(cgrouptest.OpKill) != 0 || !st.Pending(a.scope.Name) {
		t.Fatalf("after Stop: %d Terminate, %d Kill, pending %v; want SIGTERM sent and SIGKILL pending",
			f.Calls(cgrouptest.OpTerminate), f.Calls(cgrouptest.OpKill), st.Pending(a.scope.Name))
	}
	clk.Step(9 * time.Second)
	st.killDue(t.Context())
	if !a.running() || f.Calls(cgrouptest.OpKill) != 0 {
		t.Fatal("killed before its grace period ended")
	}
	clk.Step(time.Second)
	st.killDue(t.Context())
	if sig := a.signal(t); sig != syscall.SIGKILL || st.Pending(a.scope.Name) {
		t.Errorf("ended by %v (pending %v), want SIGKILL once the grace period ended", sig, st.Pending(a.scope.Name))
	}
}

// An agent that ends on SIGTERM ends by it; a grace of zero kills at once.
func TestStopSignals(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	st := New(f, clocktesting.NewFakeClock(time.Unix(1000, 0)), nil)
	polite := startAgent(t, f, `echo ready; exec sleep 600`)
	if err := st.Stop(t.Context(), polite.scope, time.Minute); err != nil {
		t.Fatal(err)
	}
	if sig := polite.signal(t); sig != syscall.SIGTERM {
		t.Errorf("a polite agent ended by %v, want SIGTERM", sig)
	}
	stubborn := startAgent(t, f, `trap "" TERM; echo ready; exec sleep 600`)
	if err := st.Stop(t.Context(), stubborn.scope, 0); err != nil {
		t.Fatal(err)
	}
	if sig := stubborn.signal(t); sig != syscall.SIGKILL || st.Pending(stubborn.scope.Name) {
		t.Errorf("grace 0 ended the agent by %v, want SIGKILL at once", sig)
	}
	if err := st.Stop(t.Context(), cgroup.Scope{Name: "marshal-coder-" + scope.NewID() + ".scope", Profile: "coder"}, time.Second); err != nil {
		t.Errorf("Stop of a scope that does not exist = %v, want nil", err)
	}
}

// Run sends a pending kill when it is due, on the real clock.
func TestRunSendsTheKill(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	st := New(f, clock.RealClock{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	a := startAgent(t, f, `trap "" TERM; echo ready; exec sleep 600`)
	if err := st.Stop(t.Context(), a.scope, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if sig := a.signal(t); sig != syscall.SIGKILL {
		t.Errorf("ended by %v, want SIGKILL", sig)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}
