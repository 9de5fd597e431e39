package admission

import (
	"errors"
	"os"
	"testing"
)

// A launcher that is the owner of every attempt (a daemon) moves the
// process it launches into the scope, not itself: BindScope records that
// process as the root, and AuthorizeRun holds only while it runs as
// itself.
func TestBindScopeRecordsTheLaunchedRoot(t *testing.T) {
	h := newHarness(t)
	p := h.ready() // the launcher, pid 100
	h.insp.set(300, 77)
	launched := Process{UID: 1000, PID: 300, StartTime: 77, BootID: "boot-a"}

	tests := []struct {
		name string
		root Process
	}{
		{"not_running", Process{UID: 1000, PID: 301, StartTime: 1, BootID: "boot-a"}},
		{"reused_pid", Process{UID: 1000, PID: 300, StartTime: 76, BootID: "boot-a"}},
		{"another_boot", Process{UID: 1000, PID: 300, StartTime: 77, BootID: "boot-z"}},
	}
	h.prepare(p, key(1))
	permit := h.begin(p, key(1))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := h.evidence(key(1), true, false)
			ev.Root = &tc.root
			_, err := h.a.BindScope(t.Context(), p, key(1), permit, ev)
			wantErr(t, "BindScope with root "+tc.name, err, ErrEvidence)
		})
	}
	ev := h.evidence(key(1), true, false)
	ev.Root = &launched
	bound, err := h.a.BindScope(t.Context(), p, key(1), permit, ev)
	if err != nil || bound.Root == nil || *bound.Root != launched {
		t.Fatalf("BindScope = %+v, %v; want the launched process as root", bound.Root, err)
	}
	if *bound.Root == p.Process() {
		t.Fatal("the launcher was recorded as the root")
	}

	// The launched process exits before the run is authorized: nothing
	// may exec.
	h.insp.kill(300)
	_, err = h.a.AuthorizeRun(t.Context(), p, key(1), permit)
	wantErr(t, "AuthorizeRun after the root exited", err, ErrUnauthorized)
	h.insp.set(300, 77)
	run, err := h.a.AuthorizeRun(t.Context(), p, key(1), permit)
	if err != nil || !run.MayExec {
		t.Fatalf("AuthorizeRun by the launcher = %+v, %v; want may_exec", run, err)
	}

	// Released on the launched process's exit, as any bound attempt.
	h.insp.kill(300)
	if r := h.reconcile(key(1), h.evidence(key(1), false, true)); r.Phase != PhaseReleased || r.Release != ReleaseScopeTerminated {
		t.Fatalf("Reconcile after the root exited = %s %s, want released scope_terminated", r.Phase, r.Release)
	}
}

// A launcher that restarted registers its next generation; the launches
// its earlier generation committed without making a scope are released
// on its report, and nothing else is.
func TestAbandonInheritedReleasesAPredecessorsUnboundLaunch(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: 30000, MemoryBytes: 64 * gib, Tasks: 4096})
	h.restart()
	old := h.register("launcher", 1, 100)
	for _, id := range []string{key(1), key(2), key(3)} {
		h.prepare(old, id)
	}
	h.begin(old, key(1)) // committed, no scope: the one to abandon
	permit := h.begin(old, key(2))
	if _, err := h.a.BindScope(t.Context(), old, key(2), permit, h.evidence(key(2), true, false)); err != nil {
		t.Fatal(err)
	}
	// key(3) stays prepared.

	h.insp.set(200, 9)
	h.restart()
	successor := h.register("launcher", 2, 200)
	ctx := t.Context()

	// The earlier generation's process still runs: it might still create
	// the scope, so nothing is inherited yet.
	_, err := h.a.AbandonInherited(ctx, successor, key(1), AbandonSpawnFailed)
	wantErr(t, "AbandonInherited while the predecessor runs", err, ErrNotFound)

	h.insp.kill(100)
	h.insp.set(400, 3)
	other := h.register("other", 5, 400)
	for name, call := range map[string]func() error{
		"another_owner":    func() error { _, err := h.a.AbandonInherited(ctx, other, key(1), AbandonSpawnFailed); return err },
		"missing":          func() error { _, err := h.a.AbandonInherited(ctx, successor, key(9), AbandonSpawnFailed); return err },
		"same_generation":  func() error { _, err := h.a.AbandonLaunch(ctx, successor, key(1), AbandonSpawnFailed); return err },
		"unknown_reason":   func() error { _, err := h.a.AbandonInherited(ctx, successor, key(1), "because"); return err },
		"bound_scope":      func() error { _, err := h.a.AbandonInherited(ctx, successor, key(2), AbandonSpawnFailed); return err },
		"still_prepared":   func() error { _, err := h.a.AbandonInherited(ctx, successor, key(3), AbandonSpawnFailed); return err },
		"zero_principal":   func() error { _, err := h.a.AbandonInherited(ctx, Principal{}, key(1), AbandonSpawnFailed); return err },
		"stale_generation": func() error { _, err := h.a.AbandonInherited(ctx, old, key(1), AbandonSpawnFailed); return err },
	} {
		want := map[string]error{
			"another_owner": ErrNotFound, "missing": ErrNotFound, "same_generation": ErrNotFound,
			"unknown_reason": ErrInvalidRequest, "bound_scope": ErrInvalidTransition,
			"still_prepared": ErrInvalidTransition, "zero_principal": ErrUnauthorized, "stale_generation": ErrUnauthorized,
		}[name]
		t.Run(name, func(t *testing.T) { wantErr(t, name, call(), want) })
	}

	before := h.committed()
	r, err := h.a.AbandonInherited(ctx, successor, key(1), AbandonSpawnFailed)
	if err != nil || r.Phase != PhaseReleased || r.Release != ReleaseNoHelperCreated || !r.KnownNotStarted() {
		t.Fatalf("AbandonInherited = %+v, %v; want released no_helper_created", r, err)
	}
	if got, want := h.committed(), before.Sub(job.Requested); got != want {
		t.Fatalf("committed = %+v, want %+v", got, want)
	}
	again, err := h.a.AbandonInherited(ctx, successor, key(1), AbandonSpawnFailed)
	if err != nil || again.Phase != PhaseReleased {
		t.Fatalf("AbandonInherited again = %s, %v; want the settled record", again.Phase, err)
	}
}

// The kernel rounds a memory limit down to a whole page: read back so, it
// confirms the reservation; anything else does not.
func TestBindScopeAcceptsAMemoryLimitRoundedToAPage(t *testing.T) {
	h := newHarness(t)
	h.intent = kernelJob
	p := h.ready()
	mem := int64(job.Requested.MemoryBytes)
	tests := []struct {
		name    string
		applied int64
		want    error
	}{
		{"exact", mem, nil},
		{"rounded_within_a_page", mem - int64(os.Getpagesize()) + 1, nil},
		{"a_page_below", mem - int64(os.Getpagesize()), ErrEvidence},
		{"above", mem + 1, ErrEvidence},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := key(10 + i)
			h.prepare(p, id)
			permit := h.begin(p, id)
			ev := h.evidence(id, true, false)
			ev.Applied.Limits.MemoryBytes = tc.applied
			_, err := h.a.BindScope(t.Context(), p, id, permit, ev)
			if !errors.Is(err, tc.want) {
				t.Fatalf("BindScope with memory %d = %v, want %v", tc.applied, err, tc.want)
			}
			if _, err := h.a.Cancel(t.Context(), p, id); err != nil {
				t.Fatal(err)
			}
			if r := h.reconcile(id, h.evidence(id, false, true)); r.Phase.Charged() {
				t.Fatalf("attempt %s still charged: %s", id, r.Phase)
			}
		})
	}
}
