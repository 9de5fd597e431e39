package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func TestAdmitPreparesWithDeadlineTTLAfterTheRequestWasTaken(t *testing.T) {
	h := newHarness(t)
	h.ttl = 7 * time.Second
	h.restart()
	p := h.ready()
	before := h.clock.Now()
	r := h.prepare(p, key(1))
	if !r.Reservation.PreparedAt.Equal(before) || !r.Reservation.Deadline.Equal(before.Add(7*time.Second)) {
		t.Errorf("reservation = %+v, want prepared at %s with deadline 7s later", r.Reservation, before)
	}
	if r.Reservation.Quantities != job.Requested || r.Plan == nil || r.Scope != "" || r.Applied != nil {
		t.Errorf("prepared record = %+v, want the job reserved, a plan, and no scope or evidence", r)
	}
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed = %+v, want %+v", got, job.Requested)
	}
}

// DevGuard: admission_reply_loss_and_policy_change_replay_one_durable_reservation.
func TestAdmitReplayReturnsTheDurableRecordAcrossRestartAndPlanChange(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	first := h.prepare(p, key(1))
	replay := h.admit(p, key(1))
	if !sameRecord(replay, first) {
		t.Fatalf("replay = %+v, want %+v", replay, first)
	}
	if got := h.committed(); got != job.Requested {
		t.Fatalf("committed after replay = %+v, want one reservation %+v", got, job.Requested)
	}
	h.caps = macosCaps
	h.restart()
	p = h.ready()
	again := h.admit(p, key(1))
	if again.Fingerprint != first.Fingerprint || again.Reservation.Deadline != first.Reservation.Deadline || *again.Plan != *first.Plan {
		t.Fatalf("replay after restart and plan change = %+v, want the stored %+v", again, first)
	}
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed after restart = %+v, want %+v", got, job.Requested)
	}
}

// DevGuard: changed_execution_or_resources_conflict_even_if_transport_identity_is_reused.
func TestSameKeyWithAnotherDigestIntentOrOwnerConflicts(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.insp.set(200, 7)
	other := h.register("other", 1, 200)
	more := job
	more.Requested.CPUMilli++
	kernel := job
	kernel.Minimum.CPU = v1alpha1.LevelKernel
	tests := []struct {
		name   string
		p      Principal
		digest string
		intent Intent
	}{
		{"another_digest", p, digestOf("different argv"), job},
		{"more_cpu", p, meaning, more},
		{"another_minimum", p, meaning, kernel},
		{"another_profile", p, meaning, Intent{Profile: "reviewer", Requested: job.Requested, Minimum: job.Minimum}},
		{"another_owner", other, meaning, job},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.a.Admit(t.Context(), tc.p, key(1), tc.digest, tc.intent)
			wantErr(t, "Admit", err, ErrAttemptConflict)
		})
	}
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed = %+v, want the one reservation", got)
	}
}

// DevGuard: closed_attempt_keys_never_become_new_work.
func TestSettledKeysNeverBecomeNewWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Phase
	}{{"cancelled", PhaseCancelled}, {"expired", PhaseExpired}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p := h.ready()
			h.prepare(p, key(1))
			if tc.want == PhaseExpired {
				h.clock.Step(h.ttl)
			} else if _, err := h.a.Cancel(t.Context(), p, key(1)); err != nil {
				t.Fatal(err)
			}
			if r := h.admit(p, key(1)); r.Phase != tc.want {
				t.Fatalf("Admit replay phase = %s, want %s", r.Phase, tc.want)
			}
			l, err := h.a.BeginLaunch(t.Context(), p, key(1))
			if err != nil || !l.Permit.IsZero() {
				t.Fatalf("BeginLaunch = %v, permit %v; want no permit", err, !l.Permit.IsZero())
			}
			if got := h.committed(); got != (Budget{}) {
				t.Errorf("committed = %+v, want zero", got)
			}
		})
	}
}

// DevGuard: no_job_is_forced_into_a_zero_remaining_budget.
func TestNothingIsAdmittedIntoZeroCapacity(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: 2999, MemoryBytes: 64 * gib, Tasks: 4096})
	h.restart()
	p := h.ready()
	r := h.admit(p, key(1))
	if r.Phase != PhaseDenied || r.Denial != DenialResourceUnavailable || r.Reservation != nil {
		t.Fatalf("Admit = %s %s reservation %v, want denied resource_unavailable without one", r.Phase, r.Denial, r.Reservation)
	}
	if got := h.committed(); got != (Budget{}) {
		t.Errorf("committed = %+v, want zero", got)
	}
}

// Any one of cpu, memory and tasks that does not fit denies.
func TestAdmitDeniesWhenAnyResourceDoesNotFit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  Budget
	}{
		{"cpu", Budget{2999, 64 * gib, 4096}},
		{"memory", Budget{64000, 2*gib - 1, 4096}},
		{"tasks", Budget{64000, 64 * gib, 63}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.capacity = capacityOf(tc.cap)
			h.restart()
			if r := h.admit(h.ready(), key(1)); r.Denial != DenialResourceUnavailable {
				t.Errorf("Admit with %+v capacity = %s %s, want denied resource_unavailable", tc.cap, r.Phase, r.Denial)
			}
		})
	}
}

// DevGuard: simultaneous_consumers_cannot_overbook_or_duplicate_a_retry;
// the issue: 16 concurrent callers on 4 keys get identical records,
// charged once each.
func TestConcurrentCallersOnFourKeysGetIdenticalRecordsChargedOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity *v1alpha1.Capacity
		prepared int
	}{
		{"all_fit", capacityOf(Budget{CPUMilli: 12000, MemoryBytes: 8 * gib, Tasks: 256}), 4},
		{"two_fit", devguardCapacity(), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.capacity = tc.capacity
			h.restart()
			p := h.ready()
			start := make(chan struct{})
			results := make([]Record, 16)
			errs := make([]error, 16)
			var wg sync.WaitGroup
			for n := range 16 {
				wg.Go(func() {
					<-start
					results[n], errs[n] = h.a.Admit(t.Context(), p, key(n%4), meaning, job)
				})
			}
			close(start)
			wg.Wait()
			prepared := map[string]bool{}
			for n, r := range results {
				if errs[n] != nil {
					t.Fatalf("caller %d: %v", n, errs[n])
				}
				if first := results[n%4]; !sameRecord(r, first) {
					t.Errorf("caller %d got %+v, caller %d got %+v for the same key", n, r, n%4, first)
				}
				if r.Phase == PhasePrepared {
					prepared[r.ID] = true
				}
			}
			if len(prepared) != tc.prepared {
				t.Errorf("%d keys prepared, want %d", len(prepared), tc.prepared)
			}
			want := Budget{}
			for range tc.prepared {
				want = want.Add(job.Requested)
			}
			if got := h.committed(); got != want {
				t.Errorf("committed = %+v, want %+v: each key charged once", got, want)
			}
		})
	}
}

// DevGuard: rejected_attempt_is_sticky_when_other_capacity_is_returned.
func TestDenialStaysDeniedAfterCapacityFrees(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.prepare(p, key(2))
	denied := h.admit(p, key(3))
	if denied.Phase != PhaseDenied {
		t.Fatalf("third Admit = %s, want denied", denied.Phase)
	}
	if _, err := h.a.Cancel(t.Context(), p, key(1)); err != nil {
		t.Fatal(err)
	}
	if again := h.admit(p, key(3)); !sameRecord(again, denied) {
		t.Fatalf("replay after capacity freed = %+v, want the stored denial", again)
	}
	h.prepare(p, key(4))
}

// DevGuard: application_evidence_is_absent_at_prepare_and_required_before_authorization.
func TestRunNeedsABoundScopeAndMayExecOnlyOnce(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	permit := h.begin(p, key(1))
	_, err := h.a.AuthorizeRun(t.Context(), p, key(1), permit)
	wantErr(t, "AuthorizeRun before binding", err, ErrInvalidTransition)
	bound, err := h.a.BindScope(t.Context(), p, key(1), permit, h.evidence(key(1), true, false))
	if err != nil {
		t.Fatal(err)
	}
	if bound.Phase != PhaseScopeBound || bound.Applied == nil || bound.Root == nil || *bound.Root != p.Process() {
		t.Fatalf("bound = %+v, want scope_bound with evidence and the caller as root", bound)
	}
	run, err := h.a.AuthorizeRun(t.Context(), p, key(1), permit)
	if err != nil || !run.MayExec || run.Record.Phase != PhaseRunAuthorized {
		t.Fatalf("AuthorizeRun = %+v, %v; want may_exec and run_authorized", run, err)
	}
	again, err := h.a.AuthorizeRun(t.Context(), p, key(1), permit)
	if err != nil || again.MayExec {
		t.Fatalf("second AuthorizeRun = %+v, %v; want may_exec false", again, err)
	}
	rebind, err := h.a.BindScope(t.Context(), p, key(1), permit, h.evidence(key(1), true, false))
	wantErr(t, "BindScope after run", err, ErrInvalidTransition)
	_ = rebind
}

// DevGuard: commit_reply_loss_never_grants_a_second_spawn_and_restart_is_suspect.
func TestBeginLaunchGivesOnePermitAndRestartMakesCommittedWorkSuspect(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	r := h.prepare(p, key(1))
	h.begin(p, key(1))
	l, err := h.a.BeginLaunch(t.Context(), p, key(1))
	if err != nil || !l.Permit.IsZero() || l.Record.Phase != PhaseLaunchCommitted {
		t.Fatalf("second BeginLaunch = %s, permit %v, %v; want launch_committed, no permit", l.Record.Phase, !l.Permit.IsZero(), err)
	}
	h.restart()
	p = h.ready()
	l, err = h.a.BeginLaunch(t.Context(), p, key(1))
	if err != nil || !l.Permit.IsZero() || l.Record.Phase != PhaseSuspect {
		t.Fatalf("BeginLaunch after restart = %s, permit %v, %v; want suspect, no permit", l.Record.Phase, !l.Permit.IsZero(), err)
	}
	h.clock.Step(time.Minute)
	if got := h.lookup(p, key(1)).Phase; got != PhaseSuspect {
		t.Errorf("phase a minute later = %s, want suspect: committed work never expires", got)
	}
	if got := h.committed(); got != r.Reservation.Quantities {
		t.Errorf("committed = %+v, want the reservation still charged", got)
	}
}

// DevGuard: cancellation_fences_a_late_helper_before_any_reclamation.
func TestCancelAfterCommitDrainsAndFencesALateBind(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	permit := h.begin(p, key(1))
	c, err := h.a.Cancel(t.Context(), p, key(1))
	if err != nil || c.Phase != PhaseDraining {
		t.Fatalf("Cancel = %s, %v; want draining", c.Phase, err)
	}
	_, err = h.a.BindScope(t.Context(), p, key(1), permit, h.evidence(key(1), true, false))
	wantErr(t, "BindScope after cancel", err, ErrInvalidTransition)
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed = %+v, want still charged while draining", got)
	}
	// Draining ends only with the scope; an unbound one with the owner's report.
	rel, err := h.a.AbandonLaunch(t.Context(), p, key(1), AbandonSpawnFailed)
	if err != nil || rel.Phase != PhaseReleased || rel.Release != ReleaseNoHelperCreated {
		t.Fatalf("AbandonLaunch = %+v, %v; want released no_helper_created", rel, err)
	}
	if got := h.committed(); got != (Budget{}) {
		t.Errorf("committed = %+v, want zero", got)
	}
}

// DevGuard: cancellation_and_commit_races_cannot_spawn_after_a_returned_reservation.
func TestCancelAndCommitInEitherOrderNeverLaunchAfterTheReservationReturns(t *testing.T) {
	for _, commitFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit_first_%v", commitFirst), func(t *testing.T) {
			h := newHarness(t)
			p := h.ready()
			h.prepare(p, key(1))
			if commitFirst {
				h.begin(p, key(1))
				if c, _ := h.a.Cancel(t.Context(), p, key(1)); c.Phase != PhaseDraining {
					t.Fatalf("Cancel = %s, want draining", c.Phase)
				}
				if h.committed() == (Budget{}) {
					t.Fatal("draining attempt is not charged")
				}
				return
			}
			if _, err := h.a.Cancel(t.Context(), p, key(1)); err != nil {
				t.Fatal(err)
			}
			if l, _ := h.a.BeginLaunch(t.Context(), p, key(1)); !l.Permit.IsZero() {
				t.Fatal("BeginLaunch after cancel returned a permit")
			}
			if h.committed() != (Budget{}) {
				t.Fatal("cancelled attempt is still charged")
			}
		})
	}
}

// DevGuard: expiry_boundary_is_inclusive_and_does_not_expire_committed_work.
func TestExpiryIsInclusiveAndSparesCommittedWork(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.prepare(p, key(2))
	h.clock.Step(h.ttl - time.Millisecond)
	h.begin(p, key(1))
	h.clock.Step(time.Millisecond)
	if got := h.lookup(p, key(2)).Phase; got != PhaseExpired {
		t.Errorf("at the deadline phase = %s, want expired", got)
	}
	h.clock.Step(10 * time.Second)
	if got := h.lookup(p, key(1)).Phase; got != PhaseLaunchCommitted {
		t.Errorf("committed attempt after its deadline = %s, want launch_committed", got)
	}
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed = %+v, want the committed one only", got)
	}
}

// The writer expires a prepared attempt at its deadline with no job
// asking: its reservation returns on time.
func TestPreparedAttemptExpiresAtItsDeadlineWithoutAnyRequest(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	changed := h.a.Changed()
	h.clock.Step(h.ttl)
	testutil.Eventually(t, changed, func() bool { return h.committed() == Budget{} }, "the expiry commit")
	if got := h.lookup(p, key(1)).Phase; got != PhaseExpired {
		t.Errorf("phase = %s, want expired", got)
	}
}

// DevGuard: root_reap_does_not_return_resources_while_descendants_remain.
func TestOnlyAnUnpopulatedScopeWithItsProcessExitedReleases(t *testing.T) {
	for _, tc := range []struct {
		name              string
		populated, exited bool
		want              Phase
	}{
		{"populated_process_running", true, false, PhaseRunAuthorized},
		{"populated_process_exited", true, true, PhaseRunAuthorized},
		{"empty_process_not_known_exited", false, false, PhaseRunAuthorized},
		{"empty_process_exited", false, true, PhaseReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p := h.ready()
			_, permit := h.bound(p, key(1))
			if _, err := h.a.AuthorizeRun(t.Context(), p, key(1), permit); err != nil {
				t.Fatal(err)
			}
			r := h.reconcile(key(1), h.evidence(key(1), tc.populated, tc.exited))
			if r.Phase != tc.want {
				t.Fatalf("phase = %s, want %s", r.Phase, tc.want)
			}
			if tc.want == PhaseReleased {
				if r.Release != ReleaseScopeTerminated || h.committed() != (Budget{}) {
					t.Errorf("release = %s, committed %+v; want scope_terminated and zero", r.Release, h.committed())
				}
			} else if h.committed() != job.Requested {
				t.Errorf("committed = %+v, want still charged", h.committed())
			}
		})
	}
}

// DevGuard's known_escape_is_sticky, in Linux terms: a missing cgroup
// directory proves nothing, and no later observation clears that; a
// reboot does.
func TestMissingScopeIsSuspectAndStickyUntilReboot(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.bound(p, key(1))
	gone := h.evidence(key(1), false, true)
	gone.Exists = false
	if r := h.reconcile(key(1), gone); r.Phase != PhaseSuspect || !r.ScopeLost {
		t.Fatalf("after a missing directory = %s lost=%v, want suspect, scope lost", r.Phase, r.ScopeLost)
	}
	if r := h.reconcile(key(1), h.evidence(key(1), false, true)); r.Phase != PhaseSuspect {
		t.Fatalf("after a later empty observation = %s, want still suspect", r.Phase)
	}
	if h.committed() != job.Requested {
		t.Fatalf("committed = %+v, want still charged", h.committed())
	}
	h.stop()
	h.insp.reboot("boot-b")
	h.open()
	// The owner's old process is gone with its boot; its successor must
	// register a new generation, to which the old attempts do not belong.
	_, err := h.a.Register(t.Context(), "runner", 1, Peer{UID: 1000, PID: 100})
	wantErr(t, "Register of the same generation after reboot", err, ErrUnauthorized)
	p = h.register("runner", 2, 100)
	_, err = h.a.Lookup(t.Context(), p, key(1))
	wantErr(t, "Lookup by the next generation", err, ErrNotFound)
	if r := allRecords(t, h)[key(1)]; r.Phase != PhaseReleased || r.Release != ReleasePreviousBoot || !r.ScopeLost {
		t.Fatalf("after reboot = %+v, want released previous_boot, history kept", r)
	}
	if h.committed() != (Budget{}) {
		t.Fatalf("committed after reboot = %+v, want zero", h.committed())
	}
}

// An attempt whose minimums are accounted is held by accounting alone: its
// scope needs no limit, however firmly the host could hold it.
func TestAccountedMinimumsNeedNoScopeLimits(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	r := h.prepare(p, key(1))
	for _, res := range cgroup.AllResources {
		if e := r.Plan.Get(res); e.Level != v1alpha1.LevelAccounted {
			t.Fatalf("attempt plan for %s = %+v, want accounted", res, e)
		}
	}
	permit := h.begin(p, key(1))
	ev := h.evidence(key(1), true, false)
	ev.Applied = cgroup.Applied{}
	if _, err := h.a.BindScope(t.Context(), p, key(1), permit, ev); err != nil {
		t.Fatalf("BindScope of a scope without limits = %v, want bound", err)
	}
}

// DevGuard: wrong_scope_stale_evidence_and_pid_reuse_never_authorize_or_release.
// Evidence that does not hold is refused with ErrEvidence and changes
// nothing, where DevGuard makes the attempt suspect.
func TestWrongScopeStaleEvidenceAndPIDReuseNeverBindOrRelease(t *testing.T) {
	h := newHarness(t)
	h.intent = kernelJob
	p := h.ready()
	h.prepare(p, key(1))
	permit := h.begin(p, key(1))

	h.insp.set(100, 51) // the owner's pid now names another process
	_, err := h.a.BindScope(t.Context(), p, key(1), permit, h.evidence(key(1), true, false))
	wantErr(t, "BindScope from a reused pid", err, ErrUnauthorized)
	h.insp.set(100, 50)

	bad := []struct {
		name   string
		mutate func(*ScopeEvidence)
	}{
		{"another_scope", func(e *ScopeEvidence) { e.Name = scope.ScopeName("coder", key(2)) }},
		{"another_profile", func(e *ScopeEvidence) { e.Name = scope.ScopeName("reviewer", key(1)) }},
		{"stale", func(e *ScopeEvidence) { e.ObservedAt = e.ObservedAt.Add(-MaxEvidenceAge - time.Nanosecond) }},
		{"from_the_future", func(e *ScopeEvidence) { e.ObservedAt = e.ObservedAt.Add(time.Nanosecond) }},
		{"scope_missing", func(e *ScopeEvidence) { e.Exists = false }},
		{"memory_limit_differs", func(e *ScopeEvidence) { e.Applied.Limits.MemoryBytes++ }},
		{"pids_not_enforced", func(e *ScopeEvidence) { delete(e.Applied.Enforced, cgroup.PIDs) }},
		{"cpu_by_another_method", func(e *ScopeEvidence) {
			e.Applied.Enforced[cgroup.CPU] = cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV2}
		}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			ev := h.evidence(key(1), true, false)
			tc.mutate(&ev)
			_, err := h.a.BindScope(t.Context(), p, key(1), permit, ev)
			wantErr(t, "BindScope", err, ErrEvidence)
		})
	}
	_, err = h.a.BindScope(t.Context(), p, key(1), newPermit(), h.evidence(key(1), true, false))
	wantErr(t, "BindScope with another permit", err, ErrUnauthorized)
	if got := h.lookup(p, key(1)).Phase; got != PhaseLaunchCommitted {
		t.Fatalf("phase after refused bindings = %s, want launch_committed", got)
	}
	if _, err := h.a.BindScope(t.Context(), p, key(1), permit, h.evidence(key(1), true, false)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range bad[:4] {
		t.Run("release_"+tc.name, func(t *testing.T) {
			ev := h.evidence(key(1), false, true)
			tc.mutate(&ev)
			_, err := h.a.Reconcile(t.Context(), key(1), ev)
			wantErr(t, "Reconcile", err, ErrEvidence)
		})
	}
	if got := h.lookup(p, key(1)); got.Phase != PhaseScopeBound || h.committed() != job.Requested {
		t.Fatalf("after refused releases = %s, committed %+v; want scope_bound and charged", got.Phase, h.committed())
	}
}

// Evidence exactly MaxEvidenceAge old is fresh; DevGuard:
// evidence_observed_during_a_transition_is_fresh_but_stale_evidence_is_not.
func TestEvidenceFreshnessBoundaryIsInclusive(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	permit := h.begin(p, key(1))
	ev := h.evidence(key(1), true, false)
	h.clock.Step(MaxEvidenceAge)
	if _, err := h.a.BindScope(t.Context(), p, key(1), permit, ev); err != nil {
		t.Fatalf("BindScope with evidence exactly %s old = %v", MaxEvidenceAge, err)
	}
	old := h.evidence(key(1), false, true)
	h.clock.Step(MaxEvidenceAge + time.Nanosecond)
	_, err := h.a.Reconcile(t.Context(), key(1), old)
	wantErr(t, "Reconcile with stale evidence", err, ErrEvidence)
}

// DevGuard: unbound_spawn_requires_positive_absence_evidence_not_owner_death.
func TestUnboundLaunchNeedsTheOwnersReportNotItsDeath(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.begin(p, key(1))
	nothing := h.evidence(key(1), false, false)
	nothing.Exists = false
	if r := h.reconcile(key(1), nothing); r.Phase != PhaseLaunchCommitted {
		t.Fatalf("unbound launch with a running owner = %s, want launch_committed", r.Phase)
	}
	h.insp.kill(100)
	if r := h.reconcile(key(1), nothing); r.Phase != PhaseSuspect {
		t.Fatalf("unbound launch with its owner gone = %s, want suspect", r.Phase)
	}
	if h.committed() != job.Requested {
		t.Fatal("owner death released the reservation")
	}
	// The owner (a new registration of the same process, which is still
	// there after all) reports that nothing was created.
	h.insp.set(100, 50)
	r, err := h.a.AbandonLaunch(t.Context(), p, key(1), AbandonGrantNotReceived)
	if err != nil || r.Phase != PhaseReleased || r.Release != ReleaseNoHelperCreated || !r.KnownNotStarted() {
		t.Fatalf("AbandonLaunch = %+v, %v; want released no_helper_created, known not started", r, err)
	}
	if h.committed() != (Budget{}) {
		t.Fatalf("committed = %+v, want zero", h.committed())
	}
}

// An unbound launch whose scope exists after all (the bind failed, or the
// daemon died between creating and binding it) is settled by that scope.
func TestUnboundLaunchWithAScopeIsSettledByThatScope(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.begin(p, key(1))
	if r := h.reconcile(key(1), h.evidence(key(1), true, false)); r.Phase != PhaseSuspect || r.Scope == "" {
		t.Fatalf("unbound launch whose scope exists = %s scope %q, want suspect with the scope", r.Phase, r.Scope)
	}
	_, err := h.a.AbandonLaunch(t.Context(), p, key(1), AbandonSpawnFailed)
	wantErr(t, "AbandonLaunch with a scope", err, ErrInvalidTransition)
	r := h.reconcile(key(1), h.evidence(key(1), false, true))
	if r.Phase != PhaseReleased || r.Release != ReleaseScopeTerminated || r.KnownNotStarted() {
		t.Fatalf("after its scope ended = %+v, want released scope_terminated, not known not started", r)
	}
}

// DevGuard: kernel_requirement_cannot_be_satisfied_by_a_macos_plan.
func TestMinimumAboveThePlanIsDeniedPolicyUnsupported(t *testing.T) {
	h := newHarness(t)
	h.caps = macosCaps
	h.restart()
	p := h.ready()
	for i, min := range []Levels{
		{v1alpha1.LevelKernel, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted},
		{v1alpha1.LevelAccounted, v1alpha1.LevelKernel, v1alpha1.LevelAccounted},
		{v1alpha1.LevelAccounted, v1alpha1.LevelAccounted, v1alpha1.LevelKernel},
	} {
		in := job
		in.Minimum = min
		r, err := h.a.Admit(t.Context(), p, key(i), meaning, in)
		if err != nil || r.Phase != PhaseDenied || r.Denial != DenialPolicyUnsupported {
			t.Errorf("Admit with minimum %+v = %s %s, %v; want denied resource_policy_unsupported", min, r.Phase, r.Denial, err)
		}
	}
	in := job
	in.Minimum.CPU = v1alpha1.LevelCooperative
	if r, _ := h.a.Admit(t.Context(), p, key(9), meaning, in); r.Phase != PhasePrepared {
		t.Errorf("cooperative cpu on a cooperative plan = %s, want prepared", r.Phase)
	}
	if got := h.committed(); got != job.Requested {
		t.Errorf("committed = %+v, want the one prepared", got)
	}
}

// A cooperative minimum for memory or tasks is decided by rank, as
// DevGuard decides it: met by a kernel limit, denied
// resource_policy_unsupported by a plan that only accounts, never refused
// as malformed.
func TestCooperativeMemoryAndTasksAreDecidedByRank(t *testing.T) {
	for _, tc := range []struct {
		name  string
		caps  cgroup.Capabilities
		phase Phase
	}{
		{"kernel_plan", kernelCaps, PhasePrepared},
		{"accounting_plan", macosCaps, PhaseDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.caps = tc.caps
			h.restart()
			p := h.ready()
			for i, min := range []Levels{
				{v1alpha1.LevelAccounted, v1alpha1.LevelCooperative, v1alpha1.LevelAccounted},
				{v1alpha1.LevelAccounted, v1alpha1.LevelAccounted, v1alpha1.LevelCooperative},
			} {
				in := job
				in.Minimum = min
				in.Requested.CPUMilli = 100
				r, err := h.a.Admit(t.Context(), p, key(i), meaning, in)
				if err != nil || r.Phase != tc.phase {
					t.Fatalf("Admit with minimum %+v = %s %s, %v; want %s", min, r.Phase, r.Denial, err, tc.phase)
				}
				if tc.phase == PhaseDenied && r.Denial != DenialPolicyUnsupported {
					t.Errorf("denial = %s, want resource_policy_unsupported", r.Denial)
				}
				if tc.phase == PhasePrepared {
					if e := r.Plan.Get(cgroup.Memory); min.Memory == v1alpha1.LevelCooperative && e.Level != v1alpha1.LevelKernel {
						t.Errorf("plan holds cooperative memory at %s, want kernel", e.Level)
					}
				}
			}
			if tc.phase == PhaseDenied && h.committed() != (Budget{}) {
				t.Errorf("committed = %+v after denials, want nothing", h.committed())
			}
		})
	}
}

// DevGuard: peer_uid_alone_does_not_grant_consumer_authority, with kernel
// identity in place of credentials, and stale generations.
func TestRegisterBindsKernelIdentityAndRefusesStaleGenerations(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	p1 := h.register("runner", 1, 100)
	if again := h.register("runner", 1, 100); again != p1 {
		t.Errorf("re-registering the same process = %+v, want %+v", again, p1)
	}
	h.insp.set(200, 9)
	_, err := h.a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 200})
	wantErr(t, "another process at the same generation", err, ErrUnauthorized)
	_, err = h.a.Register(ctx, "runner", 2, Peer{UID: 2000, PID: 200})
	wantErr(t, "another uid", err, ErrUnauthorized)
	_, err = h.a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 300})
	wantErr(t, "a pid that is not running", err, ErrUnauthorized)

	h.prepare(p1, key(1))
	p2 := h.register("runner", 2, 200)
	_, err = h.a.Admit(ctx, p1, key(2), meaning, job)
	wantErr(t, "Admit by the superseded generation", err, ErrUnauthorized)
	_, err = h.a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 100})
	wantErr(t, "registering a stale generation", err, ErrUnauthorized)
	_, err = h.a.Lookup(ctx, p2, key(1))
	wantErr(t, "Lookup of the old generation's attempt", err, ErrNotFound)
	_, err = h.a.Admit(ctx, Principal{}, key(3), meaning, job)
	wantErr(t, "Admit by the zero principal", err, ErrUnauthorized)

	// Principals do not outlive the authority that issued them.
	h.restart()
	_, err = h.a.Lookup(ctx, p2, key(1))
	wantErr(t, "Lookup with a principal of the previous opening", err, ErrUnauthorized)
	_, err = h.a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 100})
	wantErr(t, "stale generation after restart", err, ErrUnauthorized)
	h.register("runner", 2, 200)
}

// Attempts belong to their owner: to anyone else they do not exist.
func TestAnotherOwnersAttemptIsNotFound(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.insp.set(200, 7)
	other := h.register("other", 1, 200)
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"lookup":  func() error { _, err := h.a.Lookup(ctx, other, key(1)); return err },
		"cancel":  func() error { _, err := h.a.Cancel(ctx, other, key(1)); return err },
		"begin":   func() error { _, err := h.a.BeginLaunch(ctx, other, key(1)); return err },
		"abandon": func() error { _, err := h.a.AbandonLaunch(ctx, other, key(1), AbandonSpawnFailed); return err },
		"missing": func() error { _, err := h.a.Lookup(ctx, p, key(2)); return err },
	} {
		t.Run(name, func(t *testing.T) { wantErr(t, name, call(), ErrNotFound) })
	}
	if got := h.lookup(p, key(1)).Phase; got != PhasePrepared {
		t.Errorf("phase = %s, want prepared", got)
	}
}

// DevGuard: shrinking_target_does_not_shrink_an_existing_lease, with the
// real pressure controller.
func TestPressureShrinksTheTargetButNeverRevokesCharges(t *testing.T) {
	h := newHarness(t)
	ctrl := pressure.NewController()
	healthy := pressure.Sample{MemTotal: 32 * gib, MemAvailable: 20 * gib, DiskCapacity: 100 * gib, DiskAvailable: 40 * gib}
	observe := func(s pressure.Sample) pressure.Status {
		s.At = h.clock.Now()
		st, err := ctrl.Observe(s, h.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	observe(healthy)
	h.a.pressure = ctrl
	p := h.ready()
	h.prepare(p, key(1))
	h.begin(p, key(1))

	h.clock.Step(2 * time.Second)
	warn := healthy
	warn.MemAvailable = 3 * gib // at or below 10% of MemTotal
	observe(warn)
	h.clock.Step(2 * time.Second)
	if st := observe(warn); st.Level != pressure.Constrained {
		t.Fatalf("two memory warnings = %s, want constrained", st.Level)
	}
	s := h.a.Snapshot()
	if s.Target != devguardBudget().Half() || s.Committed != job.Requested {
		t.Fatalf("snapshot = %+v, want half the target and the charge kept", s)
	}
	h.clock.Step(2 * time.Second)
	critical := healthy
	critical.MemAvailable = gib // at or below 5%
	if st := observe(critical); st.Level != pressure.Critical || st.Reason != pressure.ReasonMemoryAvailable {
		t.Fatalf("critical memory = %+v, want critical at once, memory_available", st)
	}
	s = h.a.Snapshot()
	if s.Target != (Budget{}) || s.Free != (Budget{}) || s.Committed != job.Requested || s.Pressure.Reason != pressure.ReasonMemoryAvailable {
		t.Fatalf("snapshot = %+v, want zero target and free, the charge kept, reason memory_available", s)
	}
	if r := h.admit(p, key(2)); r.Denial != DenialResourceUnavailable {
		t.Fatalf("Admit under critical pressure = %s %s, want denied resource_unavailable", r.Phase, r.Denial)
	}
	if got := h.lookup(p, key(1)).Phase; got != PhaseLaunchCommitted {
		t.Fatalf("existing charge = %s, want launch_committed", got)
	}
}

func devguardBudget() Budget {
	c := devguardCapacity()
	return budgetOf(*c.CPUMilli, *c.MemoryBytes, *c.Tasks)
}

// An authority without a pressure source is closed, not open.
func TestAuthorityWithoutPressureIsClosed(t *testing.T) {
	h := newHarness(t)
	h.a.pressure = pressure.Fixed{Level: pressure.Critical, Reason: pressure.ReasonNotSampled}
	if r := h.admit(h.ready(), key(1)); r.Denial != DenialResourceUnavailable {
		t.Fatalf("Admit = %s %s, want denied", r.Phase, r.Denial)
	}
	a, err := Open(t.TempDir()+"/missing", Options{Inspector: h.insp})
	if err == nil {
		a.Close()
	}
	wantErr(t, "Open of a missing path", err, ErrJournalMissing)
}

// Without host capacity or a plan there is nothing to decide with: the
// job fails and nothing is recorded, so the key stays usable.
func TestAdmitBeforeHostAndPlanIsUnavailableAndRecordsNothing(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.a.inMu.Lock()
	h.a.inputs = hostInputs{}
	h.a.inMu.Unlock()
	if s := h.a.Snapshot(); s.Ready || s.NotReady != NotReadyHostUnset {
		t.Fatalf("snapshot = ready %v %s, want host_unset", s.Ready, s.NotReady)
	}
	before := h.commits()
	_, err := h.a.Admit(t.Context(), p, key(1), meaning, job)
	wantErr(t, "Admit without host", err, ErrUnavailable)
	if err := h.a.SetHost(h.capacity, 0); err != nil {
		t.Fatal(err)
	}
	if s := h.a.Snapshot(); s.NotReady != NotReadyPlanUnset || s.PreparedTTL != v1alpha1.DefaultPreparedTTL {
		t.Fatalf("snapshot = %s ttl %s, want plan_unset and the default ttl", s.NotReady, s.PreparedTTL)
	}
	_, err = h.a.Admit(t.Context(), p, key(1), meaning, job)
	wantErr(t, "Admit without plan", err, ErrUnavailable)
	if h.commits() != before {
		t.Fatal("a refused Admit wrote to the journal")
	}
	if err := h.a.SetPlan(kernelCaps); err != nil {
		t.Fatal(err)
	}
	h.prepare(p, key(1))
}

// No-ops write nothing: a replay, a lookup, a cancel of a settled
// attempt, a reconcile that changes nothing, a repeated registration.
func TestNoOpsWriteNothing(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	_, permit := h.bound(p, key(2))
	if _, err := h.a.Cancel(t.Context(), p, key(1)); err != nil {
		t.Fatal(err)
	}
	before := h.commits()
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"register_again":   func() error { _, err := h.a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 100}); return err },
		"admit_replay":     func() error { _, err := h.a.Admit(ctx, p, key(1), meaning, job); return err },
		"lookup":           func() error { _, err := h.a.Lookup(ctx, p, key(2)); return err },
		"cancel_cancelled": func() error { _, err := h.a.Cancel(ctx, p, key(1)); return err },
		"begin_again":      func() error { _, err := h.a.BeginLaunch(ctx, p, key(2)); return err },
		"bind_again": func() error {
			_, err := h.a.BindScope(ctx, p, key(2), permit, h.evidence(key(2), true, false))
			return err
		},
		"reconcile_running":    func() error { _, err := h.a.Reconcile(ctx, key(2), h.evidence(key(2), true, false)); return err },
		"reconcile_settled":    func() error { _, err := h.a.Reconcile(ctx, key(1), h.evidence(key(1), false, true)); return err },
		"abandon_settled":      func() error { _, err := h.a.AbandonLaunch(ctx, p, key(1), AbandonSpawnFailed); return err },
		"refused_conflict":     func() error { _, _ = h.a.Admit(ctx, p, key(1), digestOf("x"), job); return nil },
		"refused_bad_evidence": func() error { _, _ = h.a.BindScope(ctx, p, key(2), permit, ScopeEvidence{}); return nil },
	} {
		if err := call(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if h.commits() != before {
		t.Errorf("journal moved from transaction %d to %d on no-ops", before, h.commits())
	}
	h.restart()
	p = h.ready()
	before = h.commits()
	if _, err := h.a.Cancel(t.Context(), p, key(2)); err != nil {
		t.Fatal(err)
	}
	if h.commits() != before {
		t.Error("cancel of a suspect attempt wrote to the journal")
	}
}

// An OOM kill is recorded and sticks through the release; the run did not
// succeed.
func TestOOMKillIsRecordedAndNotCountedAsSuccess(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.bound(p, key(1))
	ev := h.evidence(key(1), true, false)
	ev.OOMKilled = true
	if r := h.reconcile(key(1), ev); !r.OOMKilled || r.Phase != PhaseScopeBound {
		t.Fatalf("after an OOM kill = %s oom=%v, want scope_bound with the kill recorded", r.Phase, r.OOMKilled)
	}
	r := h.reconcile(key(1), h.evidence(key(1), false, true))
	if r.Phase != PhaseReleased || !r.OOMKilled || r.KnownNotStarted() {
		t.Fatalf("released = %+v, want released with the OOM kill kept", r)
	}
}

// DevGuard: a_reclaimed_budget_is_not_automatically_a_retryable_execution.
func TestReleaseByScopeEndIsNotProofThatNothingStarted(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.bound(p, key(1))
	if r := h.reconcile(key(1), h.evidence(key(1), false, true)); r.KnownNotStarted() {
		t.Fatal("scope_terminated release counts as known not started")
	}
	h.prepare(p, key(2))
	h.begin(p, key(2))
	r, err := h.a.AbandonLaunch(t.Context(), p, key(2), AbandonHelperExited)
	if err != nil || !r.KnownNotStarted() {
		t.Fatalf("AbandonLaunch = %+v, %v; want known not started", r, err)
	}
	if l, _ := h.a.BeginLaunch(t.Context(), p, key(2)); !l.Permit.IsZero() {
		t.Fatal("a released attempt granted a permit")
	}
}

// DevGuard: a_reboot_resolves_unbound_old_processes_without_resetting_history.
func TestRebootReleasesEarlierBootsAttemptsAndKeepsHistory(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.prepare(p, key(2))
	h.begin(p, key(2))
	h.stop()
	h.insp.reboot("boot-b")
	h.open()
	if h.committed() != (Budget{}) {
		t.Fatalf("committed after reboot = %+v, want zero", h.committed())
	}
	recs := allRecords(t, h)
	if len(recs) != 2 || recs[key(1)].Phase != PhaseExpired || recs[key(2)].Phase != PhaseReleased || recs[key(2)].Release != ReleasePreviousBoot {
		t.Fatalf("records after reboot = %+v, want prepared expired and committed released previous_boot, both kept", recs)
	}
}

// allRecords is what the harness's journal holds, the log taken up.
func allRecords(t *testing.T, h *harness) map[string]Record {
	t.Helper()
	if err := h.view(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return imageRecords(t, h.a)
}

// DevGuard: journal_and_debug_output_do_not_store_registration_or_launch_secrets.
func TestPermitIsNeverStoredOrPrinted(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	l, err := h.a.BeginLaunch(t.Context(), p, key(1))
	if err != nil {
		t.Fatal(err)
	}
	secret := l.Permit.Expose()
	for _, s := range []string{fmt.Sprint(l), fmt.Sprintf("%+v", l), fmt.Sprintf("%#v", l), fmt.Sprintf("%v %s %q %x", l.Permit, l.Permit, l.Permit, l.Permit)} {
		if strings.Contains(s, secret) {
			t.Fatalf("formatted launch shows the permit: %s", s)
		}
	}
	h.stop()
	data, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) {
		t.Fatal("the journal holds the permit")
	}
	if !bytes.Contains(data, []byte(l.Permit.hash())) {
		t.Fatal("the journal does not hold the permit's hash")
	}
	h.open()
}

// A commit that fails answers an error and changes nothing; the
// authority keeps serving, says why it cannot admit, and the journal
// reopens with every answered attempt and none of the failed one.
func TestFailedCommitAnswersAnErrorAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	st, err := os.Stat(h.path)
	if err != nil {
		t.Fatal(err)
	}
	h.maxSize = int(st.Size())
	h.capacity = capacityOf(Budget{CPUMilli: MaxQuantity, MemoryBytes: MaxQuantity, Tasks: MaxQuantity})
	h.restart()
	p := h.ready()
	answered := map[string]bool{}
	var failedKey string
	for n := range 10000 {
		_, err := h.a.Admit(t.Context(), p, key(n), meaning, job)
		if err != nil {
			wantErr(t, "Admit into a full journal", err, ErrJournalFailed)
			wantErr(t, "Admit into a full journal", err, bolterrors.ErrMaxSizeReached)
			failedKey = key(n)
			break
		}
		answered[key(n)] = true
	}
	if failedKey == "" {
		t.Fatal("the journal never filled up")
	}
	if s := h.a.Snapshot(); s.Ready || s.NotReady != NotReadyJournalFull || s.JournalFailedAt.IsZero() {
		t.Fatalf("snapshot = %+v, want journal_full since a moment", s)
	}
	// What needs no write is still answered.
	if r := h.lookup(p, key(0)); r.Phase != PhasePrepared {
		t.Fatalf("Lookup after a failed commit = %s, want prepared", r.Phase)
	}
	_, err = h.a.Lookup(t.Context(), p, failedKey)
	wantErr(t, "Lookup of the attempt whose commit failed", err, ErrNotFound)
	if err := h.stop(); err != nil {
		t.Fatalf("Run after a failed commit = %v, want nil: the writer goes on", err)
	}
	h.maxSize = 0
	h.open()
	h.ready()
	recs := allRecords(t, h)
	for k := range answered {
		if recs[k].Phase != PhasePrepared {
			t.Fatalf("answered attempt %s = %s after reopen, want prepared", k, recs[k].Phase)
		}
	}
	if _, ok := recs[failedKey]; ok {
		t.Fatalf("the attempt whose commit failed, %s, is in the journal", failedKey)
	}
	if len(recs) != len(answered) {
		t.Fatalf("journal holds %d attempts, %d were answered", len(recs), len(answered))
	}
}

// A job whose context ends while it waits is not executed.
func TestRequestWithEndedContextChangesNothing(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := h.a.Admit(ctx, p, key(1), meaning, job)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := h.a.Lookup(t.Context(), p, key(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup = %v, want not found", err)
	}
}

// Requests after the authority stopped are refused, not lost.
func TestRequestsAfterStopAreClosed(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	a := h.a
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	_, err := a.Admit(t.Context(), p, key(1), meaning, job)
	wantErr(t, "Admit after stop", err, ErrClosed)
	h.open()
}

func TestRequestsAreValidatedBeforeAnythingIsRecorded(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	ctx := t.Context()
	zero := job
	zero.Requested.Tasks = 0
	unknownLevel := job
	unknownLevel.Minimum.PIDs = "strict"
	badProfile := job
	badProfile.Profile = "Not_A_Label"
	for _, tc := range []struct {
		name   string
		key    string
		digest string
		in     Intent
	}{
		{"short_key", "abc", meaning, job},
		{"uppercase_key", strings.ToUpper(key(0xabc)), meaning, job},
		{"short_digest", key(1), "abc", job},
		{"uppercase_digest", key(1), strings.ToUpper(meaning), job},
		{"zero_tasks", key(1), meaning, zero},
		{"unknown_level", key(1), meaning, unknownLevel},
		{"bad_profile", key(1), meaning, badProfile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.a.Admit(ctx, p, tc.key, tc.digest, tc.in)
			wantErr(t, "Admit", err, ErrInvalidRequest)
		})
	}
	_, err := h.a.AbandonLaunch(ctx, p, key(1), "because")
	wantErr(t, "AbandonLaunch with an unknown reason", err, ErrInvalidRequest)
	if h.committed() != (Budget{}) {
		t.Fatal("an invalid job was charged")
	}
}

// sameRecord compares records as the journal stores them.
func sameRecord(a, b Record) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// A commit that reported failure although the journal holds it (its meta
// page was written, its sync failed) has an unknown outcome: the
// authority says so, and refuses everything from then on until it is
// reopened, when Open judges the journal. The fault cannot be made on
// demand on a real file system, so the writer's judgement is called
// directly with the journal's own transaction.
func TestCommitTheJournalHoldsDespiteItsErrorFencesTheAuthority(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	cause := fmt.Errorf("fdatasync: %w", syscall.EIO)
	err := h.a.commitFailed(cause, h.a.journalHolds(h.journalTxid()))
	wantErr(t, "the judgement of a commit the journal holds", err, ErrOutcomeUnknown)
	if s := h.a.Snapshot(); s.Ready || s.NotReady != NotReadyJournalUnknown {
		t.Fatalf("snapshot = ready %v, %q; want journal_unknown", s.Ready, s.NotReady)
	}
	_, err = h.a.Lookup(t.Context(), p, key(1))
	wantErr(t, "Lookup once fenced", err, ErrJournalFailed)
	_, err = h.a.Admit(t.Context(), p, key(2), meaning, job)
	wantErr(t, "Admit once fenced", err, ErrJournalFailed)
	h.restart()
	p = h.ready()
	if r := h.lookup(p, key(1)); r.Phase != PhasePrepared {
		t.Fatalf("after reopening, attempt = %s, want prepared", r.Phase)
	}
}
