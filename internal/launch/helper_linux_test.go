package launch

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/isolation"
	"github.com/marshal-dev/marshal/internal/scope"
)

// helperConsumer is the consumer whose instance owns the grants of these
// tests: this test process, as CodeSpace is the owner of its launches.
// The helpers are its children, as CodeSpace starts them.
var helperConsumer = admission.Consumer{
	ID: "codespace", Generation: "g1", Role: admission.RoleControlService, MaxInstances: 1,
	ControlReservation: admission.Budget{CPUMilli: 10, MemoryBytes: 1 << 20, Tasks: 1},
}

// helperRequest is what each attempt of these tests asks for.
var helperRequest = admission.Budget{CPUMilli: 100, MemoryBytes: 64 << 20, Tasks: 8}

// serveConsumer serves helperConsumer, now and after every restart.
func (h *harness) serveConsumer() {
	h.t.Helper()
	h.consumers = []admission.Consumer{helperConsumer}
	if err := h.auth.SetConsumers(h.consumers, ""); err != nil {
		h.t.Fatal(err)
	}
}

// owner registers this test process as the consumer's instance with the
// authority open now, as each of the owner's sessions does.
func (h *harness) owner() admission.Principal {
	h.t.Helper()
	p, err := h.auth.RegisterInstance(h.t.Context(), helperConsumer.ID, helperConsumer.Generation, "owner-1",
		admission.Peer{UID: uint32(os.Getuid()), PID: os.Getpid()})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// grant admits attempt id for owner p and begins its launch, as the owner
// does before it starts a helper: the key and the permit it hands the
// helper.
func (h *harness) grant(p admission.Principal, id string) (admission.AttemptKey, admission.Permit) {
	h.t.Helper()
	key := admission.AttemptKey{ConsumerID: helperConsumer.ID, ConsumerGeneration: helperConsumer.Generation, AttemptID: id}
	intent := admission.Intent{Profile: "coder", Requested: helperRequest, Minimum: admission.Levels{
		CPU: v1alpha1.LevelAccounted, Memory: v1alpha1.LevelAccounted, PIDs: v1alpha1.LevelAccounted,
	}}
	r, err := h.auth.AdmitKey(h.t.Context(), p, key, strings.Repeat("ab", 32), intent)
	if err != nil || r.Phase != admission.PhasePrepared {
		h.t.Fatalf("AdmitKey(%s) = %s, %v; want prepared", id, r.Phase, err)
	}
	l, err := h.auth.BeginLaunch(h.t.Context(), p, key.ID())
	if err != nil || l.Permit.IsZero() {
		h.t.Fatalf("BeginLaunch(%s) = %s, %v; want a permit", id, l.Record.Phase, err)
	}
	return key, l.Permit
}

// present is the helper proc presenting key's grant with permit for
// owner p.
func (h *harness) present(p admission.Principal, key admission.AttemptKey, permit admission.Permit, proc *Process) (admission.Run, error) {
	return h.l.LaunchHelper(h.t.Context(), HelperLaunch{Owner: p, Key: key, Permit: permit, Helper: proc})
}

// helperHarness is a harness that serves helperConsumer, with its
// Launcher started and this test process registered as the owner.
func helperHarness(t *testing.T) (*harness, admission.Principal) {
	t.Helper()
	h := newHarness(t)
	h.serveConsumer()
	h.start()
	return h, h.owner()
}

// launchHelper grants attempt id to owner p and has a new helper present
// it, and fails the test unless the helper may exec.
func (h *harness) launchHelper(p admission.Principal, id string) (admission.AttemptKey, admission.Permit, *caller, admission.Run) {
	h.t.Helper()
	key, permit := h.grant(p, id)
	c, proc := h.caller()
	run, err := h.present(p, key, permit, proc)
	if err != nil || !run.MayExec {
		h.t.Fatalf("LaunchHelper(%s) = %+v, %v; want may exec", id, run, err)
	}
	return key, permit, c, run
}

// lookupAs is the attempt of key as owner p looks it up.
func (h *harness) lookupAs(p admission.Principal, key admission.AttemptKey) admission.Record {
	h.t.Helper()
	r, err := h.auth.Lookup(h.t.Context(), p, key.ID())
	if err != nil {
		h.t.Fatalf("Lookup(%s): %v", key.AttemptID, err)
	}
	return r
}

// A helper the owner started presents its grant: it is recorded as a
// consumer's launch, moved into the attempt's scope with the plan's
// limits, and the run bound and authorized with the helper as the
// scope's root. The same helper presenting again is answered MayExec
// false; another helper of the grant is refused and stays where it is.
// Once the helper's program ends, the attempt is released on that
// evidence and nothing is left.
func TestLaunchHelperMovesTheHelperIntoItsScope(t *testing.T) {
	h, p := helperHarness(t)
	key, permit, c, run := h.launchHelper(p, "run-1")
	id := key.ID()
	r := run.Record
	want := scope.ScopeName("coder", id)
	if r.Phase != admission.PhaseRunAuthorized || r.Scope != want || r.Root == nil || r.Root.PID != c.cmd.Process.Pid {
		t.Fatalf("attempt = %s, scope %q, root %+v; want run_authorized in %s with the helper as root", r.Phase, r.Scope, r.Root, want)
	}
	if got := h.scopeOf(c.cmd.Process.Pid); got != want {
		t.Errorf("the helper is in scope %q, want %s", got, want)
	}
	applied, err := h.backend.ScopeLimits(t.Context(), cgroup.Scope{Name: want})
	if err != nil {
		t.Fatal(err)
	}
	if limits := planLimits(*r.Plan, r.Intent.Requested); !applied.Satisfies(limits) {
		t.Errorf("scope limits %+v, want %+v", applied.Limits, limits)
	}
	if recs := h.records(); len(recs) != 1 || recs[0].ID != id || recs[0].Consumer != helperConsumer.ID || recs[0].Attempt != id ||
		recs[0].Workspace != "" || recs[0].PID != c.cmd.Process.Pid {
		t.Errorf("records = %+v, want the consumer's launch of the helper, in no workspace", recs)
	}

	again, err := Pin(c.cmd.Process.Pid, uint32(os.Getuid()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if run, err := h.present(p, key, permit, again); err != nil || run.MayExec || run.Record.Phase != admission.PhaseRunAuthorized {
		t.Errorf("the same helper again = %+v, %v; want the run, may exec false", run, err)
	}
	other, otherProc := h.caller()
	if _, err := h.present(p, key, permit, otherProc); !errors.Is(err, admission.ErrInvalidTransition) {
		t.Errorf("another helper of the grant = %v, want ErrInvalidTransition", err)
	}
	if got := h.scopeOf(other.cmd.Process.Pid); got != "" {
		t.Errorf("a refused helper was moved into %s", got)
	}

	c.exit(t)
	h.settle(Plan{ID: id, Scope: want})
	if r := h.lookupAs(p, key); r.Phase != admission.PhaseReleased || r.Release != admission.ReleaseScopeTerminated {
		t.Errorf("after the helper's end = %s %s, want released scope_terminated", r.Phase, r.Release)
	}
	if s := h.auth.Snapshot(); s.Charged != 0 || s.Committed != (admission.Budget{}) {
		t.Errorf("charged %d (%+v) at the end, want nothing", s.Charged, s.Committed)
	}
	if len(h.records()) != 0 || len(h.scopes()) != 0 {
		t.Errorf("left: records %v, scopes %v", h.records(), h.scopes())
	}
}

// A helper refused before its scope exists claims nothing: no record, no
// scope, the grant still committed, and the owner's own helper launches
// it after.
func TestLaunchHelperRefusalsClaimNothing(t *testing.T) {
	h, p := helperHarness(t)
	key, permit := h.grant(p, "refused")
	_, otherPermit := h.grant(p, "other")
	notBegun := admission.AttemptKey{ConsumerID: helperConsumer.ID, ConsumerGeneration: helperConsumer.Generation, AttemptID: "not-begun"}
	if _, err := h.auth.AdmitKey(t.Context(), p, notBegun, strings.Repeat("cd", 32), admission.Intent{
		Profile: "coder", Requested: helperRequest,
		Minimum: admission.Levels{CPU: v1alpha1.LevelAccounted, Memory: v1alpha1.LevelAccounted, PIDs: v1alpha1.LevelAccounted},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// present presents a grant as a helper that is refused.
		present func(t *testing.T) error
		want    error
	}{
		{"not_the_owners_child", func(t *testing.T) error {
			self, err := Pin(os.Getpid(), uint32(os.Getuid()), 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.present(p, key, permit, self)
			return err
		}, ErrNotOwnersChild},
		{"a_helper_that_exited", func(t *testing.T) error {
			c, proc := h.caller()
			c.exit(t)
			_, err := h.present(p, key, permit, proc)
			return err
		}, ErrNotOwnersChild},
		{"another_grants_permit", func(t *testing.T) error {
			_, proc := h.caller()
			_, err := h.present(p, key, otherPermit, proc)
			return err
		}, admission.ErrUnauthorized},
		{"a_launch_not_begun", func(t *testing.T) error {
			_, proc := h.caller()
			_, err := h.present(p, notBegun, permit, proc)
			return err
		}, admission.ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.present(t); !errors.Is(err, tc.want) {
				t.Fatalf("LaunchHelper = %v, want %v", err, tc.want)
			}
			if r := h.lookupAs(p, key); r.Phase != admission.PhaseLaunchCommitted || r.Scope != "" {
				t.Errorf("the grant after the refusal = %s, scope %q; want launch_committed, unclaimed", r.Phase, r.Scope)
			}
			if len(h.records()) != 0 || len(h.scopes()) != 0 {
				t.Errorf("a refusal left records %v, scopes %v", h.records(), h.scopes())
			}
		})
	}
	c, proc := h.caller()
	if run, err := h.present(p, key, permit, proc); err != nil || !run.MayExec {
		t.Fatalf("the owner's helper after the refusals = %+v, %v; want may exec", run, err)
	}
	c.exit(t)
	h.settle(Plan{ID: key.ID(), Scope: scope.ScopeName("coder", key.ID())})
}

// A crash of marshald at any step of a helper's launch, then a restart,
// loses nothing and counts nothing twice: right after the restart the
// attempt is charged once, for what it reserved, in the phase a restart
// makes of the step it reached; the owner, registered again, finds it;
// and once the owner has settled it (abandoned a grant that made no
// scope, or let its helper end), nothing is charged and no record or
// scope is left. Each case does the steps of LaunchHelper up to the
// crash with the real parts.
func TestRestartMidHelperLaunchLosesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash func(h *harness, p admission.Principal, key admission.AttemptKey, permit admission.Permit, proc *Process)
		// phase is the attempt's right after the restart; scoped says
		// the helper was in its scope, which its end settles.
		phase  admission.Phase
		scoped bool
	}{
		{
			name:  "after_begin",
			crash: func(*harness, admission.Principal, admission.AttemptKey, admission.Permit, *Process) {},
			phase: admission.PhaseSuspect,
		},
		{
			name: "after_the_record",
			crash: func(h *harness, _ admission.Principal, key admission.AttemptKey, _ admission.Permit, proc *Process) {
				h.putHelper(key, proc)
			},
			phase: admission.PhaseSuspect,
		},
		{
			name: "after_the_scope_before_the_bind",
			crash: func(h *harness, _ admission.Principal, key admission.AttemptKey, _ admission.Permit, proc *Process) {
				h.putHelper(key, proc)
				if _, _, err := h.backend.CreateScope(h.t.Context(), "coder", key.ID(), proc.PID, cgroup.Limits{}); err != nil {
					h.t.Fatal(err)
				}
			},
			phase:  admission.PhaseSuspect,
			scoped: true,
		},
		{
			name: "after_the_bind",
			crash: func(h *harness, p admission.Principal, key admission.AttemptKey, permit admission.Permit, proc *Process) {
				if run, err := h.present(p, key, permit, proc); err != nil || !run.MayExec {
					h.t.Fatalf("LaunchHelper = %+v, %v", run, err)
				}
			},
			phase:  admission.PhaseSuspect,
			scoped: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.serveConsumer()
			h.daemonProcess()
			h.start()
			p := h.owner()
			key, permit := h.grant(p, "a-1")
			c, proc := h.caller()
			tc.crash(h, p, key, permit, proc)

			h.restart()
			p = h.owner()
			r := h.lookupAs(p, key)
			if r.Phase != tc.phase {
				t.Errorf("attempt after the restart = %s, want %s", r.Phase, tc.phase)
			}
			if s := h.auth.Snapshot(); s.Charged != 1 || s.Committed != helperRequest {
				t.Errorf("after the restart %d charged, committed %+v; want the attempt once, %+v", s.Charged, s.Committed, helperRequest)
			}

			c.exit(t)
			if tc.scoped {
				h.settle(Plan{ID: key.ID(), Scope: scope.ScopeName("coder", key.ID())})
				if r := h.lookupAs(p, key); r.Phase != admission.PhaseReleased || r.Release != admission.ReleaseScopeTerminated {
					t.Errorf("after the helper's end = %s %s, want released scope_terminated", r.Phase, r.Release)
				}
			} else {
				r, err := h.auth.AbandonLaunch(t.Context(), p, key.ID(), admission.AbandonHelperExited)
				if err != nil || r.Phase != admission.PhaseReleased || r.Release != admission.ReleaseNoHelperCreated {
					t.Errorf("the owner abandoning = %s %s, %v; want released no_helper_created", r.Phase, r.Release, err)
				}
			}
			if s := h.auth.Snapshot(); s.Charged != 0 || s.Committed != (admission.Budget{}) {
				t.Errorf("charged %d (%+v) at the end, want nothing", s.Charged, s.Committed)
			}
			if len(h.records()) != 0 || len(h.scopes()) != 0 {
				t.Errorf("left: records %v, scopes %v", h.records(), h.scopes())
			}
		})
	}
}

// putHelper writes the launch record of key's helper proc, as
// LaunchHelper does before it makes the scope.
func (h *harness) putHelper(key admission.AttemptKey, proc *Process) {
	h.t.Helper()
	id := key.ID()
	rec := Record{
		ID: id, Profile: "coder", Attempt: id, Consumer: key.ConsumerID,
		PID: proc.PID, UID: proc.UID, StartTime: proc.StartTime, BootID: h.l.bootID, Started: h.clock.Now(),
	}
	if err := h.store.Put(h.t.Context(), rec); err != nil {
		h.t.Fatal(err)
	}
}

// Observe, as DevGuard's observe does, reconciles the attempt on its
// scope read now: a running helper leaves it as it is; a scope gone
// without its end having been seen is no evidence of that end, and the
// attempt becomes suspect with its tracking lost, still charged, where
// DevGuard's observation that fails leaves it too.
func TestObserveOfAScopeLostIsSuspect(t *testing.T) {
	h, p := helperHarness(t)
	key, _, c, _ := h.launchHelper(p, "lost")
	id := key.ID()
	if err := h.l.Observe(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if r := h.lookupAs(p, key); r.Phase != admission.PhaseRunAuthorized || r.ScopeLost {
		t.Fatalf("observed while the helper runs = %s, lost %v; want run_authorized", r.Phase, r.ScopeLost)
	}
	sc := removeEnded(t, h, key, c)
	if err := h.l.Observe(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	r := h.lookupAs(p, key)
	if r.Phase != admission.PhaseSuspect || !r.ScopeLost || r.Scope != sc.Name {
		t.Errorf("observed once its scope is gone = %s, lost %v, scope %q; want suspect with its tracking lost", r.Phase, r.ScopeLost, r.Scope)
	}
	if s := h.auth.Snapshot(); s.Charged != 1 || s.Committed != helperRequest {
		t.Errorf("%d charged, committed %+v; want the suspect attempt still charged", s.Charged, s.Committed)
	}
	if err := h.l.Observe(t.Context(), "never"); !errors.Is(err, ErrUnknownLaunch) {
		t.Errorf("Observe of no launch = %v, want ErrUnknownLaunch", err)
	}
}

// A helper's launch under a profile with filesystem rules is refused
// before its scope exists, as under netns isolation: the helper execs
// its program itself and cannot confine it.
func TestLaunchHelperRefusesAConfinedProfile(t *testing.T) {
	h := newHarness(t)
	h.network = func(*v1alpha1.Workspace, uint32) (Network, error) {
		return Network{Netns: &isolation.Launch{Helper: "/opt/marshal-confine", HostNetwork: true,
			Filesystem: &isolation.Filesystem{Default: "read"}}}, nil
	}
	h.serveConsumer()
	h.start()
	p := h.owner()
	key, permit := h.grant(p, "confined")
	_, proc := h.caller()
	if _, err := h.present(p, key, permit, proc); !errors.Is(err, ErrIsolationNotGiven) {
		t.Fatalf("LaunchHelper = %v, want %v", err, ErrIsolationNotGiven)
	}
	if len(h.records()) != 0 || len(h.scopes()) != 0 {
		t.Errorf("a refusal left records %v, scopes %v", h.records(), h.scopes())
	}
}
