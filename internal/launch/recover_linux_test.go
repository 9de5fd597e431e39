package launch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// A crash at any step of a launch, then a restart, leaks nothing. Each
// case stops the launch where a crash would (doing the steps before it
// with the real parts), restarts the Launcher and the authority from what
// survives, lets the caller exit, and checks that no reservation, slot,
// record or scope is left.
func TestRestartMidLaunchLeaksNothing(t *testing.T) {
	tests := []struct {
		name string
		// crash does the steps of a launch up to the crash, for a caller
		// that was prepared in pe.
		crash func(h *harness, pe *PreparedExecution, req Request)
		// atOnce launches as Launcher.Launch does: the crash is given an
		// execution prepared without admission.
		atOnce bool
		// afterRestart is the attempt's phase ("" when it was never
		// recorded) and the slots held right after the restart.
		phase admission.Phase
		held  int64
	}{
		{
			name:  "after_admission",
			crash: func(h *harness, pe *PreparedExecution, req Request) {},
			phase: admission.PhasePrepared,
		},
		{
			name:  "after_begin_before_the_record",
			crash: func(h *harness, pe *PreparedExecution, req Request) { h.begin(pe) },
			phase: admission.PhaseReleased,
		},
		{
			name: "after_the_record_before_begin",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				h.put(pe)
			},
			phase: admission.PhasePrepared,
		},
		{
			name: "after_begin_and_the_record",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				h.begin(pe)
				h.put(pe)
			},
			phase: admission.PhaseReleased,
		},
		{
			name: "after_the_scope_before_the_bind",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				h.begin(pe)
				h.put(pe)
				h.createScope(pe)
			},
			phase: admission.PhaseSuspect,
			held:  1,
		},
		{
			name: "after_the_launch",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				if _, err := pe.Launch(h.t.Context(), req); err != nil {
					h.t.Fatal(err)
				}
			},
			phase: admission.PhaseSuspect,
			held:  1,
		},
		{
			name:   "at_once_after_the_record_before_admission",
			crash:  func(h *harness, pe *PreparedExecution, req Request) { h.put(pe) },
			atOnce: true,
		},
		{
			name:   "at_once_after_admission_before_the_record",
			crash:  func(h *harness, pe *PreparedExecution, req Request) { h.admitLaunch(pe) },
			atOnce: true,
			phase:  admission.PhaseReleased,
		},
		{
			name: "at_once_after_admission_and_the_record",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				h.put(pe)
				h.admitLaunch(pe)
			},
			atOnce: true,
			phase:  admission.PhaseReleased,
		},
		{
			name: "at_once_after_the_scope_before_the_bind",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				h.put(pe)
				h.admitLaunch(pe)
				h.createScope(pe)
			},
			atOnce: true,
			phase:  admission.PhaseSuspect,
			held:   1,
		},
		{
			name: "at_once_after_the_launch",
			crash: func(h *harness, pe *PreparedExecution, req Request) {
				lc := pe.launching()
				lc.admitting = true
				if _, ref := lc.run(h.t.Context()); ref != nil {
					h.t.Fatal(ref)
				}
			},
			atOnce: true,
			phase:  admission.PhaseSuspect,
			held:   1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.workspace("web", v1alpha1.ParticipationRequired, 1)
			h.daemonProcess()
			h.start()
			gen := h.l.Generation()
			req := h.request("web")
			c, p := h.caller()
			var pe *PreparedExecution
			if tc.atOnce {
				var ref *Refusal
				if pe, ref = h.l.prepare(t.Context(), req, p, h.clock.Now(), false); ref != nil {
					t.Fatal(ref)
				}
				pe.used = true
			} else {
				var err error
				if pe, err = h.l.Prepare(t.Context(), req, p); err != nil {
					t.Fatal(err)
				}
			}
			tc.crash(h, pe, req)

			h.restart()
			if h.l.Generation() != gen+1 {
				t.Errorf("generation after restart = %d, want %d", h.l.Generation(), gen+1)
			}
			id := pe.ID()
			if got := h.recorded(id).Phase; got != tc.phase {
				t.Errorf("attempt after restart = %s, want %s", got, tc.phase)
			}
			if got := h.l.Slots().Held("web"); got != tc.held {
				t.Errorf("slots held after restart = %d, want %d", got, tc.held)
			}

			c.exit(t)
			if tc.held > 0 {
				h.settle(Plan{ID: id, Scope: scope.ScopeName("coder", id)})
			}
			if tc.phase == admission.PhasePrepared {
				changed := h.auth.Changed()
				h.clock.Step(h.auth.Snapshot().PreparedTTL)
				<-changed
			}
			if s := h.auth.Snapshot(); s.Charged != 0 || s.Committed != (admission.Budget{}) {
				t.Errorf("charged %d (%+v) at the end, want nothing; attempt %s", s.Charged, s.Committed, h.recorded(id).Phase)
			}
			if h.l.Slots().Held("web") != 0 || len(h.records()) != 0 || len(h.scopes()) != 0 {
				t.Errorf("left: %d slots, records %v, scopes %v", h.l.Slots().Held("web"), h.records(), h.scopes())
			}
		})
	}
}

// A restart re-arms the timeout of a live launch from its record.
func TestRestartRearmsTheTimeout(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationNone, 1)
	h.daemonProcess()
	h.start()
	req := h.request("web")
	req.Timeout = time.Minute
	deadline := h.clock.Now().Add(req.Timeout)
	c, plan := h.launch(req)
	h.restart()
	if info, ok := h.l.Info(plan.ID); !ok || info.Workspace != "web" || !strings.HasSuffix(info.Path, "/"+plan.Scope) {
		t.Fatalf("Info after restart = %+v, %v; want the workspace and the scope's path", info, ok)
	}
	h.launcherClock.waitArmed(t, deadline)
	h.clock.Step(time.Minute)
	select {
	case <-c.done:
	case <-time.After(testutil.Deadline):
		t.Fatal("the timeout was not re-armed")
	}
	h.settle(plan)
}

// begin begins pe's launch with the authority, as Launch does first.
func (h *harness) begin(pe *PreparedExecution) {
	h.t.Helper()
	l, err := h.auth.BeginLaunch(h.t.Context(), h.l.principal, pe.Attempt())
	if err != nil || l.Permit.IsZero() {
		h.t.Fatalf("BeginLaunch = %s, %v", l.Record.Phase, err)
	}
}

// createScope creates pe's scope with its caller in it, as Launch does
// once committed.
func (h *harness) createScope(pe *PreparedExecution) {
	h.t.Helper()
	if _, _, err := h.backend.CreateScope(h.t.Context(), "coder", pe.ID(), pe.caller.PID, pe.limits()); err != nil {
		h.t.Fatal(err)
	}
}

// admitLaunch admits pe's attempt and begins its launch in one request,
// as Launcher.Launch does first.
func (h *harness) admitLaunch(pe *PreparedExecution) {
	h.t.Helper()
	l, err := h.auth.AdmitLaunch(h.t.Context(), h.l.principal, pe.ID(), pe.digest, pe.x.Intent)
	if err != nil || l.Permit.IsZero() {
		h.t.Fatalf("AdmitLaunch = %s, %v", l.Record.Phase, err)
	}
}

// put writes pe's launch record, as Launch does before creating the
// scope; its workspace participates, so the record names the attempt.
func (h *harness) put(pe *PreparedExecution) {
	h.t.Helper()
	rec := Record{
		ID: pe.ID(), Workspace: pe.x.Workspace, Profile: pe.x.Profile, Attempt: pe.ID(), Generation: h.l.generation,
		PID: pe.caller.PID, UID: pe.caller.UID, StartTime: pe.caller.StartTime, BootID: h.l.bootID, Started: h.clock.Now(),
	}
	if err := h.store.Put(h.t.Context(), rec); err != nil {
		h.t.Fatal(err)
	}
}

// recorded is the attempt as the journal holds it, whichever generation
// admitted it: a charged one from the charged set, a settled or prepared
// one from Reconcile, which returns those unchanged whatever the
// evidence; the zero Record when it was never recorded.
func (h *harness) recorded(id string) admission.Record {
	h.t.Helper()
	charged, err := h.auth.Charged(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range charged {
		if r.ID == id && r.Phase != admission.PhasePrepared {
			return r
		}
	}
	r, err := h.auth.Reconcile(h.t.Context(), id, admission.ScopeEvidence{})
	if errors.Is(err, admission.ErrNotFound) {
		return admission.Record{} // never recorded
	}
	if err != nil {
		h.t.Fatalf("reading attempt %s: %v", id, err)
	}
	return r
}
