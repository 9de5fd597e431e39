package admission

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// realLaunch is one execution on the real parts: a child process standing
// for the caller that is moved into its scope, a real cgroup2 directory
// named by the naming contract, and /proc for identities.
type realLaunch struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	id    string
	dir   string
}

func startOwner(t *testing.T) *realLaunch {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read line")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &realLaunch{cmd: cmd, stdin: stdin, id: scope.NewID()}
}

// observe reads the scope the way the agent controller does: the
// directory, cgroup.events' populated, and whether the launched process
// still runs as itself.
func (l *realLaunch) observe(t *testing.T, name string) ScopeEvidence {
	t.Helper()
	ev := ScopeEvidence{Name: name, ObservedAt: time.Now()}
	data, err := os.ReadFile(filepath.Join(l.dir, "cgroup.events"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		t.Fatal(err)
	default:
		ev.Exists = true
		ev.Populated = strings.Contains(string(data), "populated 1")
	}
	_, err = Procfs{}.StartTime(l.cmd.Process.Pid)
	ev.ProcessExited = errors.Is(err, ErrNoProcess)
	return ev
}

// waitEmpty waits for cgroup.events to say populated 0, woken by inotify.
func (l *realLaunch) waitEmpty(t *testing.T) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	events := filepath.Join(l.dir, "cgroup.events")
	if err := w.Add(events); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, w.Events, func() bool {
		data, err := os.ReadFile(events)
		return err == nil && strings.Contains(string(data), "populated 0")
	}, "the scope to empty")
}

// The whole launch on real parts: a real owner process moved into a real
// cgroup2 scope; the reservation stays while the scope is populated, is
// released once it is empty and the process has exited, and a scope
// directory that vanished proves nothing.
func TestRealScopeIsReleasedOnlyOnEvidence(t *testing.T) {
	tree := testutil.NewCgroupTree(t)
	path := filepath.Join(t.TempDir(), "admission.db")
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, Options{Pressure: pressure.Fixed{Level: pressure.Normal, Reason: pressure.ReasonNone}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetHost(capacityOf(Budget{4000, 8 * gib, 1024}), time.Minute); err != nil {
		t.Fatal(err)
	}
	// v2 controllers cannot be enabled on every host; the plan is what
	// the cgroup2 tree gives without them.
	if err := a.SetPlan(cgroup.Capabilities{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		a.Close()
		checkConsistent(t, path)
	})
	in := Intent{Profile: "coder", Requested: Budget{250, 256 << 20, 32}, Minimum: job.Minimum}

	launch := func(l *realLaunch) (Principal, Permit, string) {
		t.Helper()
		p, err := a.Register(ctx, "run-"+l.id[:8], 1, Peer{UID: uint32(os.Getuid()), PID: l.cmd.Process.Pid})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := a.Admit(ctx, p, l.id, meaning, in); err != nil || r.Phase != PhasePrepared {
			t.Fatalf("Admit = %v, %v", r.Phase, err)
		}
		lc, err := a.BeginLaunch(ctx, p, l.id)
		if err != nil {
			t.Fatal(err)
		}
		name := scope.ScopeName("coder", l.id)
		l.dir = tree.V2(scope.RootSlice, scope.SliceName("coder"), name)
		if err := os.MkdirAll(l.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l.dir, "cgroup.procs"), []byte(strconv.Itoa(l.cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		if r, err := a.BindScope(ctx, p, l.id, lc.Permit, l.observe(t, name)); err != nil || r.Root.StartTime == 0 {
			t.Fatalf("BindScope = %+v, %v", r, err)
		}
		if run, err := a.AuthorizeRun(ctx, p, l.id, lc.Permit); err != nil || !run.MayExec {
			t.Fatalf("AuthorizeRun = %+v, %v", run, err)
		}
		return p, lc.Permit, name
	}

	l := startOwner(t)
	_, _, name := launch(l)
	if r, err := a.Reconcile(ctx, l.id, l.observe(t, name)); err != nil || r.Phase != PhaseRunAuthorized {
		t.Fatalf("Reconcile while running = %v, %v; want run_authorized", r.Phase, err)
	}
	l.stdin.Close() // the process exits
	l.waitEmpty(t)
	if ev := l.observe(t, name); !ev.ProcessExited {
		// Unpopulated, but its exit is not yet known: not evidence.
		if r, err := a.Reconcile(ctx, l.id, ev); err != nil || r.Phase != PhaseRunAuthorized {
			t.Fatalf("Reconcile before the exit is known = %v, %v", r.Phase, err)
		}
	}
	l.cmd.Wait()
	r, err := a.Reconcile(ctx, l.id, l.observe(t, name))
	if err != nil || r.Phase != PhaseReleased || r.Release != ReleaseScopeTerminated {
		t.Fatalf("Reconcile after the scope ended = %+v, %v; want released scope_terminated", r, err)
	}
	if s := a.Snapshot(); s.Committed != (Budget{}) {
		t.Fatalf("committed = %+v, want zero", s.Committed)
	}

	// The scope vanishes before anyone saw it empty: suspect, still charged.
	l2 := startOwner(t)
	_, _, name2 := launch(l2)
	l2.stdin.Close()
	l2.waitEmpty(t)
	l2.cmd.Wait()
	if err := os.Remove(l2.dir); err != nil {
		t.Fatal(err)
	}
	r, err = a.Reconcile(ctx, l2.id, l2.observe(t, name2))
	if err != nil || r.Phase != PhaseSuspect || !r.ScopeLost {
		t.Fatalf("Reconcile of a vanished scope = %+v, %v; want suspect, scope lost", r, err)
	}
	if s := a.Snapshot(); s.Committed != in.Requested {
		t.Fatalf("committed = %+v, want the vanished scope's reservation kept", s.Committed)
	}
}

// The real /proc and a real process: a caller that is gone cannot
// register, and a bound process that exited cannot be authorized.
func TestRealProcessIdentityGuardsRegistration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admission.db")
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done; a.Close() }()
	l := startOwner(t)
	pid := l.cmd.Process.Pid
	p, err := a.Register(ctx, "runner", 1, Peer{UID: uint32(os.Getuid()), PID: pid})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Process(); got.PID != pid || got.StartTime == 0 || got.BootID == "" {
		t.Fatalf("registered process = %+v, want pid %d with its start time and boot", got, pid)
	}
	l.stdin.Close()
	l.cmd.Wait()
	_, err = a.Register(ctx, "runner", 1, Peer{UID: uint32(os.Getuid()), PID: pid})
	wantErr(t, "Register of an exited process", err, ErrUnauthorized)
	_, err = a.AuthorizeRun(ctx, p, key(1), newPermit())
	wantErr(t, "AuthorizeRun by an exited process", err, ErrUnauthorized)
}
