package admission

import (
	"testing"
)

// AdmitLaunch records the attempt committed to its launch, with its one
// permit, in one transaction; a replay commits nothing and grants no
// second permit; a denial is recorded as Admit records it.
func TestAdmitLaunchCommitsOnce(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	before := h.commits()
	l, err := h.a.AdmitLaunch(t.Context(), p, key(1), meaning, job)
	if err != nil || l.Permit.IsZero() || l.Record.Phase != PhaseLaunchCommitted || l.Record.Reservation == nil {
		t.Fatalf("AdmitLaunch = %s, permit %v, %v; want launch_committed with a permit", l.Record.Phase, !l.Permit.IsZero(), err)
	}
	if got := h.commits(); got != before+1 {
		t.Errorf("AdmitLaunch took %d transactions, want 1", got-before)
	}
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed = %+v, want the request", got)
	}
	again, err := h.a.AdmitLaunch(t.Context(), p, key(1), meaning, job)
	if err != nil || !again.Permit.IsZero() || again.Record.Phase != PhaseLaunchCommitted {
		t.Fatalf("replayed AdmitLaunch = %s, permit %v, %v; want launch_committed, no permit", again.Record.Phase, !again.Permit.IsZero(), err)
	}
	_, err = h.a.AdmitLaunch(t.Context(), p, key(1), digestOf("another meaning"), job)
	wantErr(t, "AdmitLaunch of another meaning", err, ErrAttemptConflict)

	// A prepared attempt is begun by it, as BeginLaunch would.
	h.prepare(p, key(2))
	if l, err := h.a.AdmitLaunch(t.Context(), p, key(2), meaning, job); err != nil || l.Permit.IsZero() {
		t.Fatalf("AdmitLaunch of a prepared attempt = %s, %v; want a permit", l.Record.Phase, err)
	}
	h.intent = Intent{Profile: job.Profile, Requested: Budget{CPUMilli: MaxQuantity, MemoryBytes: 1, Tasks: 1}, Minimum: job.Minimum}
	before = h.commits()
	d, err := h.a.AdmitLaunch(t.Context(), p, key(3), meaning, h.intent)
	if err != nil || d.Record.Phase != PhaseDenied || !d.Permit.IsZero() || h.commits() != before+1 {
		t.Fatalf("AdmitLaunch over capacity = %s, permit %v, %v, %d transactions; want denied, recorded once",
			d.Record.Phase, !d.Permit.IsZero(), err, h.commits()-before)
	}
}

// BindAndAuthorize binds the scope and authorizes the run in one
// transaction, on the same checks as BindScope and AuthorizeRun; a
// replay is told MayExec false; a refusal changes nothing.
func TestBindAndAuthorizeCommitsOnce(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	permit := h.begin(p, key(1))
	before := h.commits()
	_, err := h.a.BindAndAuthorize(t.Context(), p, key(1), newPermit(), h.evidence(key(1), true, false))
	wantErr(t, "BindAndAuthorize with another permit", err, ErrUnauthorized)
	stale := h.evidence(key(1), true, false)
	stale.Name = "marshal-coder-" + key(2) + ".scope"
	_, err = h.a.BindAndAuthorize(t.Context(), p, key(1), permit, stale)
	wantErr(t, "BindAndAuthorize on another scope's evidence", err, ErrEvidence)
	if got := h.lookup(p, key(1)).Phase; got != PhaseLaunchCommitted || h.commits() != before {
		t.Fatalf("after refusals: %s, %d transactions; want launch_committed, none", got, h.commits()-before)
	}
	run, err := h.a.BindAndAuthorize(t.Context(), p, key(1), permit, h.evidence(key(1), true, false))
	if err != nil || !run.MayExec || run.Record.Phase != PhaseRunAuthorized || run.Record.Scope == "" || run.Record.Root == nil {
		t.Fatalf("BindAndAuthorize = %+v, %v; want may_exec, run_authorized, bound", run, err)
	}
	if got := h.commits(); got != before+1 {
		t.Errorf("BindAndAuthorize took %d transactions, want 1", got-before)
	}
	again, err := h.a.BindAndAuthorize(t.Context(), p, key(1), permit, h.evidence(key(1), true, false))
	if err != nil || again.MayExec {
		t.Fatalf("replayed BindAndAuthorize = %+v, %v; want may_exec false", again, err)
	}
}

// Across the log's checkpoints, each request of the launch path still
// waits for one durable commit: the log is taken up between batches,
// after their answers.
func TestLaunchPathCommitsOnceAcrossCheckpoints(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: MaxQuantity, MemoryBytes: MaxQuantity, Tasks: MaxQuantity})
	h.restart()
	p := h.ready()
	for n := 0; h.a.checkpoints.Load() < 2; n++ {
		if n > 2*walSize/walPage {
			t.Fatal("the log was never taken up")
		}
		before := h.commits()
		l, err := h.a.AdmitLaunch(t.Context(), p, key(n), meaning, job)
		if err != nil || l.Permit.IsZero() {
			t.Fatalf("AdmitLaunch %d = %v", n, err)
		}
		if got := h.commits() - before; got != 1 {
			t.Fatalf("AdmitLaunch %d waited for %d commits, want 1", n, got)
		}
		before = h.commits()
		if _, err := h.a.BindAndAuthorize(t.Context(), p, key(n), l.Permit, h.evidence(key(n), true, false)); err != nil {
			t.Fatalf("BindAndAuthorize %d = %v", n, err)
		}
		if got := h.commits() - before; got != 1 {
			t.Fatalf("BindAndAuthorize %d waited for %d commits, want 1", n, got)
		}
	}
}
