package launch

import (
	"context"
	"sync"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
)

// lossy is the authority with some answers lost: the request is made, and
// committed, and its caller is told its deadline passed instead, which is
// what a lost reply looks like. It counts the requests of the launch path
// too. The real authority cannot lose an answer on demand; this is the
// only fake of the package's tests but the cgroup tree that stands for
// the kernel's without root.
type lossy struct {
	Authority
	mu sync.Mutex
	// drop holds the requests whose next answer is lost.
	drop map[string]bool
	// calls counts the requests made.
	calls map[string]int
}

func newLossy(a Authority, drop ...string) *lossy {
	x := &lossy{Authority: a, drop: map[string]bool{}, calls: map[string]int{}}
	for _, d := range drop {
		x.drop[d] = true
	}
	return x
}

// lost counts a call of request and reports whether its answer is lost.
func (x *lossy) lost(request string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.calls[request]++
	lost := x.drop[request]
	delete(x.drop, request)
	return lost
}

func (x *lossy) count(request string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.calls[request]
}

func (x *lossy) Admit(ctx context.Context, p admission.Principal, key, digest string, in admission.Intent) (admission.Record, error) {
	r, err := x.Authority.Admit(ctx, p, key, digest, in)
	if x.lost("Admit") {
		return admission.Record{}, context.DeadlineExceeded
	}
	return r, err
}

func (x *lossy) Lookup(ctx context.Context, p admission.Principal, key string) (admission.Record, error) {
	r, err := x.Authority.Lookup(ctx, p, key)
	if x.lost("Lookup") {
		return admission.Record{}, context.DeadlineExceeded
	}
	return r, err
}

func (x *lossy) BeginLaunch(ctx context.Context, p admission.Principal, key string) (admission.Launch, error) {
	r, err := x.Authority.BeginLaunch(ctx, p, key)
	if x.lost("BeginLaunch") {
		return admission.Launch{}, context.DeadlineExceeded
	}
	return r, err
}

func (x *lossy) AdmitLaunch(ctx context.Context, p admission.Principal, key, digest string, in admission.Intent) (admission.Launch, error) {
	r, err := x.Authority.AdmitLaunch(ctx, p, key, digest, in)
	if x.lost("AdmitLaunch") {
		return admission.Launch{}, context.DeadlineExceeded
	}
	return r, err
}

func (x *lossy) BindAndAuthorize(ctx context.Context, p admission.Principal, key string, permit admission.Permit, ev admission.ScopeEvidence) (admission.Run, error) {
	x.lost("BindAndAuthorize")
	return x.Authority.BindAndAuthorize(ctx, p, key, permit, ev)
}

func (x *lossy) Cancel(ctx context.Context, p admission.Principal, key string) (admission.Record, error) {
	x.lost("Cancel")
	return x.Authority.Cancel(ctx, p, key)
}

func (x *lossy) AbandonLaunch(ctx context.Context, p admission.Principal, key string, reason admission.AbandonReason) (admission.Record, error) {
	x.lost("AbandonLaunch")
	return x.Authority.AbandonLaunch(ctx, p, key, reason)
}

// An unknown answer is looked up exactly once and never replayed: found
// prepared it is cancelled, found settled it is reported, not found it
// stays unknown; a launch begun whose permit was lost is abandoned.
func TestUnknownOutcomeIsLookedUpOnceAndNeverReplayed(t *testing.T) {
	tests := []struct {
		name      string
		drop      []string
		request   int64 // memory_bytes, 0: the default
		code      Code
		state     State
		wantPhase admission.Phase
	}{
		{"admit_lost_found_prepared", []string{"Admit"}, 0, CodeAdmissionUnknown, StateCancelled, admission.PhaseCancelled},
		{"admit_lost_found_denied", []string{"Admit"}, 8 << 30, CodeResourceUnavailable, StateDenied, admission.PhaseDenied},
		{"admit_and_lookup_lost", []string{"Admit", "Lookup"}, 0, CodeAdmissionUnknown, StateUnknown, admission.PhasePrepared},
		{"begin_lost_found_begun", []string{"BeginLaunch"}, 0, CodeInternal, StateCancelled, admission.PhaseReleased},
		// At once: the admission and the launch's beginning are one
		// request, and so one answer to lose.
		{"admit_launch_lost_found_begun", []string{"AdmitLaunch"}, 0, CodeAdmissionUnknown, StateCancelled, admission.PhaseReleased},
		{"admit_launch_lost_found_denied", []string{"AdmitLaunch"}, 8 << 30, CodeResourceUnavailable, StateDenied, admission.PhaseDenied},
		{"admit_launch_and_lookup_lost", []string{"AdmitLaunch", "Lookup"}, 0, CodeAdmissionUnknown, StateUnknown, admission.PhaseLaunchCommitted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			admit := "Admit"
			if tc.drop[0] == "AdmitLaunch" {
				h.mode, admit = "at_once", "AdmitLaunch"
			}
			w := h.workspace("web", v1alpha1.ParticipationRequired, 1)
			if tc.request != 0 {
				*w.Spec.Resources.Request.MemoryBytes = tc.request
			}
			var x *lossy
			h.wrap = func(a Authority) Authority {
				if x == nil {
					x = newLossy(a, tc.drop...)
					return x
				}
				return a // after a restart
			}
			h.daemonProcess()
			h.start()
			_, p := h.caller()
			_, err := h.run(h.request("web"), p)
			r := refusal(t, err, tc.code, tc.state)
			if x.count(admit) != 1 || x.count("Lookup") != 1 {
				t.Errorf("%s called %d times, Lookup %d; want once each", admit, x.count(admit), x.count("Lookup"))
			}
			if got := h.lookup(r.Attempt); got.Phase != tc.wantPhase {
				t.Errorf("attempt = %s, want %s", got.Phase, tc.wantPhase)
			}
			if h.l.Slots().Held("web") != 0 || len(h.scopes()) != 0 || len(h.records()) != 0 {
				t.Errorf("held %d, scopes %v, records %v; want nothing", h.l.Slots().Held("web"), h.scopes(), h.records())
			}
			if tc.wantPhase == admission.PhasePrepared {
				// Left to its deadline, never admitted again.
				changed := h.auth.Changed()
				h.clock.Step(h.auth.Snapshot().PreparedTTL)
				<-changed
				if got := h.lookup(r.Attempt).Phase; got != admission.PhaseExpired || x.count("Admit") != 1 {
					t.Errorf("after its deadline: %s, Admit called %d times; want expired, once", got, x.count("Admit"))
				}
			}
			if tc.wantPhase == admission.PhaseLaunchCommitted {
				// Nothing was created: the next generation abandons it.
				h.restart()
				if got := h.recorded(r.Attempt).Phase; got != admission.PhaseReleased {
					t.Errorf("after a restart: %s, want released", got)
				}
			}
		})
	}
}

// An optional workspace whose admission answer is lost runs unaccounted
// once the lookup has cancelled what was admitted.
func TestUnknownOutcomeOfAnOptionalWorkspaceRunsUnaccounted(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationOptional, 1)
	var x *lossy
	h.wrap = func(a Authority) Authority { x = newLossy(a, "Admit"); return x }
	h.start()
	c, plan := h.launch(h.request("web"))
	if plan.Attempt != "" || plan.Unaccounted != UnaccountedAdmissionUnknown {
		t.Fatalf("plan = %+v, want unaccounted admission_unknown", plan)
	}
	if x.count("Admit") != 1 || x.count("Lookup") != 1 || h.auth.Snapshot().Charged != 0 {
		t.Errorf("Admit %d, Lookup %d, charged %d; want once, once, nothing", x.count("Admit"), x.count("Lookup"), h.auth.Snapshot().Charged)
	}
	c.exit(t)
	h.settle(plan)
}
