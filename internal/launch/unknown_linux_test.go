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
// what a lost reply looks like. The real authority cannot lose an answer
// on demand; this is the only fake of the package's tests but the cgroup
// tree that stands for the kernel's without root.
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			w := h.workspace("web", v1alpha1.ParticipationRequired, 1)
			if tc.request != 0 {
				*w.Spec.Resources.Request.MemoryBytes = tc.request
			}
			var x *lossy
			h.wrap = func(a Authority) Authority { x = newLossy(a, tc.drop...); return x }
			h.start()
			req := h.request("web")
			_, p := h.caller()
			pe, err := h.l.Prepare(t.Context(), req, p)
			if err == nil {
				_, err = pe.Launch(t.Context(), req)
			}
			r := refusal(t, err, tc.code, tc.state)
			if x.count("Admit") != 1 || x.count("Lookup") != 1 {
				t.Errorf("Admit called %d times, Lookup %d; want once each", x.count("Admit"), x.count("Lookup"))
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
