package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/isolation"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// An admitted launch puts the caller in the scope named for its attempt,
// with the limits the plan calls for, bound and authorized; once the
// caller exits, the attempt is released on that evidence, and forgetting
// the launch frees its slot and deletes its record.
func TestLaunchPutsTheCallerInItsScope(t *testing.T) {
	eachMode(t, func(t *testing.T, h *harness) {
		w := h.workspace("web", v1alpha1.ParticipationRequired, 2)
		h.start()
		c, plan := h.launch(h.request("web", "true", "--flag"))

		if plan.Attempt == "" || plan.Attempt != plan.ID || plan.Scope != scope.ScopeName("coder", plan.ID) {
			t.Fatalf("plan = %+v, want the scope named for the attempt", plan)
		}
		if plan.Path != "/usr/bin/true" || plan.Dir != w.Spec.Root || !slices.Equal(plan.Argv, []string{"true", "--flag"}) {
			t.Errorf("plan runs %s %q in %s, want /usr/bin/true [true --flag] in %s", plan.Path, plan.Argv, plan.Dir, w.Spec.Root)
		}
		for _, kv := range []string{"PATH=/usr/bin:/bin", "HOME=/root", "TEAM=web", "MARSHAL_WORKSPACE=web", "MARSHAL_PROFILE=coder", "MARSHAL_NETWORK=open"} {
			if !slices.Contains(plan.Env, kv) {
				t.Errorf("plan env %q lacks %s", plan.Env, kv)
			}
		}
		if got := h.scopeOf(c.cmd.Process.Pid); got != plan.Scope {
			t.Errorf("caller is in scope %q, want its scope %s", got, plan.Scope)
		}
		r := h.lookup(plan.Attempt)
		if r.Phase != admission.PhaseRunAuthorized || r.Root == nil || r.Root.PID != c.cmd.Process.Pid || r.Scope != plan.Scope {
			t.Fatalf("attempt = %s, root %+v, scope %s; want run_authorized with the caller as root", r.Phase, r.Root, r.Scope)
		}
		applied, err := h.backend.ScopeLimits(t.Context(), cgroup.Scope{Name: plan.Scope})
		if err != nil {
			t.Fatal(err)
		}
		if want := planLimits(*r.Plan, r.Intent.Requested); !applied.Satisfies(want) {
			t.Errorf("scope limits %+v, want %+v", applied.Limits, want)
		}
		info, ok := h.l.Info(plan.ID)
		if !ok || info.Workspace != "web" || info.Attempt != plan.Attempt || info.ID != plan.ID ||
			info.Profile != "coder" || !strings.HasSuffix(info.Path, "/"+plan.Scope) {
			t.Errorf("Info = %+v, %v; want workspace web, profile coder, the attempt and the scope's path", info, ok)
		}
		if all := h.l.Launches(); len(all) != 1 || all[0] != info {
			t.Errorf("Launches = %+v, want the one launch", all)
		}
		if held, reserved := h.l.Slots().Held("web"), h.l.Reserved("web"); held != 1 || reserved != 0 {
			t.Errorf("slots held %d, reserved %d; want 1 filled", held, reserved)
		}
		if recs := h.records(); len(recs) != 1 || recs[0].ID != plan.ID || recs[0].PID != c.cmd.Process.Pid {
			t.Errorf("records = %+v, want the launch's", recs)
		}

		// Running: not over.
		over, _, err := h.l.Settle(t.Context(), cgroup.Scope{Name: plan.Scope, ID: plan.ID}, time.Time{})
		if err != nil || over {
			t.Fatalf("Settle while running = %v, %v; want not over", over, err)
		}
		c.exit(t)
		h.settle(plan)
		if r := h.lookup(plan.Attempt); r.Phase != admission.PhaseReleased || r.Release != admission.ReleaseScopeTerminated {
			t.Errorf("attempt after the caller exited = %s %s, want released scope_terminated", r.Phase, r.Release)
		}
		if s := h.auth.Snapshot(); s.Committed != (admission.Budget{}) || s.Charged != 0 {
			t.Errorf("committed %+v over %d, want nothing", s.Committed, s.Charged)
		}
		if held := h.l.Slots().Held("web"); held != 0 || len(h.records()) != 0 || len(h.scopes()) != 0 {
			t.Errorf("after forget: %d held, records %v, scopes %v; want none", held, h.records(), h.scopes())
		}
	})
}

// Without participation nothing is asked of the authority: the scope has
// an ID of its own and no limits.
func TestLaunchWithoutParticipation(t *testing.T) {
	eachMode(t, func(t *testing.T, h *harness) {
		h.workspace("web", v1alpha1.ParticipationNone, 1)
		h.start()
		c, plan := h.launch(h.request("web"))
		if plan.Attempt != "" || !scope.ValidID(plan.ID) {
			t.Fatalf("plan = %+v, want no attempt and a fresh ID", plan)
		}
		applied, err := h.backend.ScopeLimits(t.Context(), cgroup.Scope{Name: plan.Scope})
		if err != nil || applied.Limits != (cgroup.Limits{}) {
			t.Errorf("scope limits = %+v, %v; want none", applied.Limits, err)
		}
		if s := h.auth.Snapshot(); s.Charged != 0 {
			t.Errorf("charged = %d, want 0", s.Charged)
		}
		c.exit(t)
		h.settle(plan)
		if h.l.Slots().Held("web") != 0 {
			t.Error("slot not freed")
		}
	})
}

// A prepared execution is used once: whichever of Launch and Cancel
// comes second is ErrConsumed, and changes nothing.
func TestPreparedExecutionIsUsedOnce(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 8)
	h.start()
	ctx := t.Context()
	tests := []struct {
		name          string
		first, second func(*PreparedExecution, Request) error
		wantPhase     admission.Phase
	}{
		{"launch_then_launch", launchIt, launchIt, admission.PhaseRunAuthorized},
		{"launch_then_cancel", launchIt, cancelIt, admission.PhaseRunAuthorized},
		{"cancel_then_launch", cancelIt, launchIt, admission.PhaseCancelled},
		{"cancel_then_cancel", cancelIt, cancelIt, admission.PhaseCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := h.request("web")
			_, p := h.caller()
			pe, err := h.l.Prepare(ctx, req, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.first(pe, req); err != nil {
				t.Fatalf("first use: %v", err)
			}
			held := h.l.Slots().Held("web")
			if err := tc.second(pe, req); !errors.Is(err, ErrConsumed) {
				t.Fatalf("second use = %v, want ErrConsumed", err)
			}
			if got := h.lookup(pe.Attempt()).Phase; got != tc.wantPhase {
				t.Errorf("attempt = %s, want %s", got, tc.wantPhase)
			}
			if h.l.Slots().Held("web") != held {
				t.Error("the second use changed the slots")
			}
		})
	}
}

func launchIt(pe *PreparedExecution, req Request) error {
	_, err := pe.Launch(context.Background(), req)
	return err
}

func cancelIt(pe *PreparedExecution, _ Request) error { return pe.Cancel(context.Background()) }

// Launch asked for another execution than the one prepared creates
// nothing: the attempt is cancelled and the slot freed.
func TestDigestMismatchIsNeverLaunched(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 8)
	h.workspace("docs", v1alpha1.ParticipationRequired, 8)
	h.start()
	tests := []struct {
		name   string
		mutate func(*Request)
	}{
		{"other_argv", func(r *Request) { r.Argv = []string{"true", "--other"} }},
		{"other_command", func(r *Request) { r.Argv = []string{"false"} }},
		{"other_terminal", func(r *Request) { r.TTY = !r.TTY }},
		{"other_workspace", func(r *Request) { r.Workspace = "docs" }},
		{"other_timeout", func(r *Request) { r.Timeout = time.Minute }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := h.request("web")
			c, p := h.caller()
			pe, err := h.l.Prepare(t.Context(), req, p)
			if err != nil {
				t.Fatal(err)
			}
			other := req
			other.Argv = slices.Clone(req.Argv)
			tc.mutate(&other)
			_, err = pe.Launch(t.Context(), other)
			refusal(t, err, CodeInternal, StateCancelled)
			if !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("cause = %v, want ErrDigestMismatch", err)
			}
			if got := h.lookup(pe.Attempt()).Phase; got != admission.PhaseCancelled {
				t.Errorf("attempt = %s, want cancelled", got)
			}
			if h.l.Slots().Held("web") != 0 || len(h.scopes()) != 0 || len(h.records()) != 0 {
				t.Errorf("held %d, scopes %v, records %v; want nothing", h.l.Slots().Held("web"), h.scopes(), h.records())
			}
			if got := h.scopeOf(c.cmd.Process.Pid); got != "" {
				t.Errorf("caller moved to %s", got)
			}
		})
	}
}

// A prepared execution launched after its deadline creates nothing: it
// expired.
func TestExpiredBeforeLaunch(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 8)
	h.start()
	req := h.request("web")
	_, p := h.caller()
	pe, err := h.l.Prepare(t.Context(), req, p)
	if err != nil {
		t.Fatal(err)
	}
	changed := h.auth.Changed()
	h.clock.SetTime(pe.Deadline())
	<-changed // the authority expires it at its deadline
	_, err = pe.Launch(t.Context(), req)
	refusal(t, err, CodeResourceUnavailable, StateExpired)
	if !errors.Is(err, ErrExpired) {
		t.Errorf("cause = %v, want ErrExpired", err)
	}
	if got := h.lookup(pe.Attempt()).Phase; got != admission.PhaseExpired {
		t.Errorf("attempt = %s, want expired", got)
	}
	if h.l.Slots().Held("web") != 0 || len(h.scopes()) != 0 || h.auth.Snapshot().Charged != 0 {
		t.Error("an expired launch left a slot, a scope or a charge")
	}
}

// Cancelling before launch returns the reservation and the slot.
func TestCancelBeforeLaunchFreesTheSlot(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	h.start()
	_, p := h.caller()
	pe, err := h.l.Prepare(t.Context(), h.request("web"), p)
	if err != nil {
		t.Fatal(err)
	}
	if h.l.Slots().Held("web") != 1 || h.l.Reserved("web") != 1 || h.auth.Snapshot().Charged != 1 {
		t.Fatal("a prepared execution holds no slot or no reservation")
	}
	if err := pe.Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := h.lookup(pe.Attempt()).Phase; got != admission.PhaseCancelled {
		t.Errorf("attempt = %s, want cancelled", got)
	}
	if h.l.Slots().Held("web") != 0 || h.auth.Snapshot().Charged != 0 {
		t.Error("cancel left a slot or a charge")
	}
	h.launch(h.request("web")) // the slot is free again
}

// A caller that stops waiting drops its prepared execution: it is
// cancelled in the background, and its slot freed.
func TestDroppedExecutionSettlesInTheBackground(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	h.start()
	ctx, cancel := context.WithCancel(t.Context())
	_, p := h.caller()
	pe, err := h.l.Prepare(ctx, h.request("web"), p)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	testutil.Eventually(t, h.changed, func() bool {
		r, err := h.auth.Lookup(t.Context(), h.l.principal, pe.Attempt())
		return err == nil && r.Phase == admission.PhaseCancelled && h.l.Slots().Held("web") == 0
	}, "the dropped execution cancelled and its slot freed")
	if _, err := pe.Launch(t.Context(), h.request("web")); !errors.Is(err, ErrConsumed) {
		t.Errorf("Launch after the drop = %v, want ErrConsumed", err)
	}
}

// Slot and attempt are released separately: the attempt when the scope's
// end is evidence, the slot when the launch is forgotten.
func TestSlotAndAttemptAreReleasedSeparately(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	h.start()
	c, plan := h.launch(h.request("web"))
	c.exit(t)
	sc := cgroup.Scope{Name: plan.Scope, ID: plan.ID, Profile: "coder"}
	testutil.Eventually(t, h.changed, func() bool {
		over, _, err := h.l.Settle(t.Context(), sc, time.Time{})
		return over && err == nil
	}, "the launch to be over")
	if r := h.lookup(plan.Attempt); r.Phase != admission.PhaseReleased {
		t.Fatalf("attempt = %s, want released", r.Phase)
	}
	if h.l.Slots().Held("web") != 1 {
		t.Fatal("the slot was freed with the attempt, before the scope was gone")
	}
	_, p := h.caller()
	_, err := h.l.Prepare(t.Context(), h.request("web"), p)
	refusal(t, err, CodeWorkspaceBusy, StateNotAsked)
	if err := h.backend.RemoveScope(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	if err := h.l.Forget(t.Context(), plan.ID); err != nil {
		t.Fatal(err)
	}
	if h.l.Slots().Held("web") != 0 {
		t.Fatal("forgetting the launch did not free its slot")
	}
}

// A request over max_live is refused before the authority is asked: the
// admissions counter does not move, nothing is charged.
func TestOccupiedSlotIsRefusedBeforeAdmission(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	h.start()
	h.launch(h.request("web"))
	before, charged := h.admissions(), h.auth.Snapshot().Charged
	c, p := h.caller()
	_, err := h.l.Prepare(t.Context(), h.request("web"), p)
	r := refusal(t, err, CodeWorkspaceBusy, StateNotAsked)
	if r.Detail != "live process limit reached (1 of 1)" || r.Attempt != "" || r.PID != c.cmd.Process.Pid {
		t.Errorf("refusal = %+v", r)
	}
	if after := h.admissions(); after != before {
		t.Errorf("admissions went from %q to %q", before, after)
	}
	if h.auth.Snapshot().Charged != charged || h.l.Slots().Held("web") != 1 {
		t.Error("the busy request changed the charges or the slots")
	}
}

// admissions is what the metrics count of admissions.
func (h *harness) admissions() string {
	rec := httptest.NewRecorder()
	h.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "marshal_admissions_total{") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

// Many requests racing for the slots get exactly max_live of them.
func TestRacingRequestsGetExactlyMaxLiveSlots(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 3)
	h.start()
	const n = 12
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started int
		busy    int
	)
	for range n {
		_, p := h.caller()
		wg.Go(func() {
			req := h.request("web")
			pe, err := h.l.Prepare(t.Context(), req, p)
			if err == nil {
				_, err = pe.Launch(t.Context(), req)
			}
			mu.Lock()
			defer mu.Unlock()
			var r *Refusal
			switch {
			case err == nil:
				started++
			case errors.As(err, &r) && r.Code == CodeWorkspaceBusy:
				busy++
			default:
				t.Errorf("launch: %v", err)
			}
		})
	}
	wg.Wait()
	if started != 3 || busy != n-3 || len(h.scopes()) != 3 {
		t.Fatalf("%d started, %d busy, scopes %v; want 3 started, %d busy", started, busy, h.scopes(), n-3)
	}
}

// Denied, unsupported or unanswerable admission reserves nothing and
// starts nothing when participation is required, and runs unaccounted,
// saying why, when it is optional.
func TestAdmissionRefusals(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(*harness, *v1alpha1.Workspace)
		code   Code
		state  State
		detail string
		reason Unaccounted
	}{
		{
			name:   "shortage",
			setup:  func(h *harness, w *v1alpha1.Workspace) { *w.Spec.Resources.Request.MemoryBytes = 8 << 30 },
			code:   CodeResourceUnavailable,
			state:  StateDenied,
			detail: "memory_bytes requested 8589934592 (8GiB), free 4294967296 (4GiB) of 4294967296 (4GiB)",
			reason: UnaccountedResourceUnavailable,
		},
		{
			name: "unsupported_minimum",
			setup: func(h *harness, w *v1alpha1.Workspace) {
				w.Spec.Resources.Request.Minimum.Memory = v1alpha1.LevelKernel
				if err := h.auth.SetPlan(cgroup.Capabilities{}); err != nil {
					h.t.Fatal(err)
				}
			},
			code:   CodePolicyUnsupported,
			state:  StateDenied,
			detail: "memory minimum kernel, host gives accounted",
			reason: UnaccountedPolicyUnsupported,
		},
		{
			name:   "closed_authority",
			setup:  func(h *harness, w *v1alpha1.Workspace) { h.stopAuth() },
			code:   CodeAuthorityUnavailable,
			state:  StateNotRecorded,
			detail: "admission authority unavailable",
			reason: UnaccountedAuthorityUnavailable,
		},
	}
	for _, tc := range tests {
		for _, p := range []v1alpha1.Participation{v1alpha1.ParticipationRequired, v1alpha1.ParticipationOptional} {
			t.Run(tc.name+"_"+string(p), func(t *testing.T) {
				eachMode(t, func(t *testing.T, h *harness) {
					w := h.workspace("web", p, 1)
					h.start()
					tc.setup(h, w)
					c, caller := h.caller()
					req := h.request("web")
					plan, err := h.run(req, caller)
					if p == v1alpha1.ParticipationRequired {
						r := refusal(t, err, tc.code, tc.state)
						if r.Detail != tc.detail || r.PID != c.cmd.Process.Pid {
							t.Errorf("refusal = %+v, want detail %q", r, tc.detail)
						}
						if h.l.Slots().Held("web") != 0 || len(h.scopes()) != 0 || h.scopeOf(c.cmd.Process.Pid) != "" {
							t.Errorf("a refused launch left a slot (%d) or a scope (%v)", h.l.Slots().Held("web"), h.scopes())
						}
						if tc.name != "closed_authority" && h.auth.Snapshot().Charged != 0 {
							t.Error("a refused launch is charged")
						}
						return
					}
					if err != nil {
						t.Fatalf("optional participation refused: %v", err)
					}
					if plan.Attempt != "" || plan.Unaccounted != tc.reason || !scope.ValidID(plan.ID) {
						t.Errorf("plan = %+v, want unaccounted %s", plan, tc.reason)
					}
					if h.scopeOf(c.cmd.Process.Pid) != plan.Scope {
						t.Error("the unaccounted run is not in its scope")
					}
					if recs := h.records(); len(recs) != 1 || recs[0].ID != plan.ID || recs[0].Attempt != "" {
						t.Errorf("records = %+v, want the unaccounted launch's alone", recs)
					}
				})
			})
		}
	}
}

// The timeout kills the scope when it expires, on the Launcher's clock.
func TestTimeoutKillsTheScope(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	h.start()
	req := h.request("web")
	req.Timeout = time.Minute
	deadline := h.clock.Now().Add(req.Timeout)
	c, plan := h.launch(req)
	h.launcherClock.waitArmed(t, deadline)
	h.clock.Step(time.Minute - time.Second)
	select {
	case <-c.done:
		t.Fatal("killed before its timeout")
	default:
	}
	h.clock.Step(time.Second)
	select {
	case <-c.done:
	case <-time.After(testutil.Deadline):
		t.Fatal("not killed at its timeout")
	}
	h.settle(plan)
	if h.auth.Snapshot().Charged != 0 || h.l.Slots().Held("web") != 0 {
		t.Error("a timed-out launch left a charge or a slot")
	}
}

// Authorization comes first: a workspace that is not declared or not
// Ready, exec not allowed, an argv[0] off the list or not found: refused
// before a slot or the authority.
func TestAuthorizationRefusals(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	deny := h.workspace("deny", v1alpha1.ParticipationRequired, 1)
	*deny.Spec.Exec.Allow = false
	listed := h.workspace("listed", v1alpha1.ParticipationRequired, 1)
	listed.Spec.Exec.Argv0 = []string{"git"}
	h.workspace("unready", v1alpha1.ParticipationRequired, 1)
	h.ws.ready["unready"] = false
	h.start()
	tests := []struct {
		name   string
		req    Request
		code   Code
		detail string
	}{
		{"not_declared", h.request("nope"), CodeWorkspaceNotReady, detailNotDeclared},
		{"not_ready", h.request("unready"), CodeWorkspaceNotReady, detailNotReady},
		{"exec_not_allowed", h.request("deny"), CodeExecNotAllowed, detailExecNotAllowed},
		{"argv0_not_listed", h.request("listed", "true"), CodeExecNotAllowed, detailArgv0NotAllowed},
		{"not_found", h.request("web", "no-such-command-here"), CodeExecNotAllowed, detailNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, p := h.caller()
			_, err := h.l.Prepare(t.Context(), tc.req, p)
			if r := refusal(t, err, tc.code, StateNotAsked); r.Detail != tc.detail {
				t.Errorf("detail = %q, want %q", r.Detail, tc.detail)
			}
			if h.auth.Snapshot().Charged != 0 || h.l.Slots().Held(tc.req.Workspace) != 0 {
				t.Error("an unauthorized request reserved something")
			}
		})
	}
}

// Launched at once, an admitted launch asks the authority for two
// requests, each one durable commit: AdmitLaunch before anything is
// created, BindAndAuthorize once the scope exists.
func TestLaunchAtOnceMakesTwoRequests(t *testing.T) {
	h := newHarness(t)
	h.mode = "at_once"
	h.workspace("web", v1alpha1.ParticipationRequired, 1)
	var x *lossy
	h.wrap = func(a Authority) Authority { x = newLossy(a); return x }
	h.start()
	c, plan := h.launch(h.request("web"))
	if r := h.lookup(plan.Attempt); r.Phase != admission.PhaseRunAuthorized || r.Scope != plan.Scope {
		t.Fatalf("attempt = %s on %q, want run_authorized on %s", r.Phase, r.Scope, plan.Scope)
	}
	for request, want := range map[string]int{"AdmitLaunch": 1, "BindAndAuthorize": 1, "Admit": 0, "BeginLaunch": 0, "Lookup": 0, "Cancel": 0, "AbandonLaunch": 0} {
		if got := x.count(request); got != want {
			t.Errorf("%s asked %d times, want %d", request, got, want)
		}
	}
	c.exit(t)
	h.settle(plan)
	if r := h.lookup(plan.Attempt); r.Phase != admission.PhaseReleased {
		t.Errorf("attempt after the caller exited = %s, want released", r.Phase)
	}
}

// A profile's environment (the egress proxy's) reaches the plan, is part
// of the digest, and a profile that needs what cannot be given is refused
// before anything is asked.
func TestProfileEnvReachesThePlan(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationNone, 2)
	proxy := map[string]string{"HTTPS_PROXY": "http://127.0.0.1:4750", "NO_PROXY": ""}
	var fail error
	h.network = func(w *v1alpha1.Workspace, uid uint32) (Network, error) {
		if w.Spec.Profile != "coder" || uid != uint32(os.Getuid()) {
			t.Errorf("Network(%q, %d), want coder and the caller's uid", w.Spec.Profile, uid)
		}
		return Network{Env: proxy}, fail
	}
	h.start()
	_, p := h.caller()
	pe, err := h.l.Prepare(t.Context(), h.request("web"), p)
	if err != nil {
		t.Fatal(err)
	}
	if x := pe.Execution(); x.Changes["HTTPS_PROXY"] != proxy["HTTPS_PROXY"] || !slices.Contains(x.Env, "NO_PROXY=") ||
		x.Changes[EnvIsolation] != "cgroup" {
		t.Errorf("execution changes %v, env %v: want the proxy, isolation cgroup", x.Changes, x.Env)
	}
	pe.Cancel(t.Context())

	for _, tc := range []struct {
		err    error
		code   Code
		detail string
	}{
		{ErrNoEgressProxy, CodeEgressUnavailable, detailNoEgressProxy},
		{fmt.Errorf("x: %w", &EgressUnavailableError{Cause: "not listening on 127.0.0.1:4750: address in use", Fix: "choose another address with --egress-address"}),
			CodeEgressUnavailable, "egress proxy not listening on 127.0.0.1:4750: address in use; choose another address with --egress-address"},
		{fmt.Errorf("x: %w", &isolation.UnavailableError{Reason: "user namespaces are disabled (user.max_user_namespaces is 0)"}),
			CodeIsolationUnsupported, "netns isolation unavailable: user namespaces are disabled (user.max_user_namespaces is 0)"},
	} {
		fail = tc.err
		_, p = h.caller()
		_, err = h.l.Prepare(t.Context(), h.request("web"), p)
		if r := refusal(t, err, tc.code, StateNotAsked); r.Detail != tc.detail {
			t.Errorf("detail = %q, want %q", r.Detail, tc.detail)
		}
	}
}

// Under netns isolation the plan runs the helper, which execs the
// agent's own path and argv; the record says so, and the launch's
// namespace is the one its process makes, not the host's.
func TestNetnsPlanRunsTheHelper(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationRequired, 2)
	h.network = func(*v1alpha1.Workspace, uint32) (Network, error) {
		return Network{Netns: &isolation.Launch{Helper: "/opt/marshal-confine", Socket: "/run/egress.sock"}}, nil
	}
	h.start()
	_, p := h.caller()
	plan, err := h.l.Launch(t.Context(), h.request("web"), p)
	if err != nil {
		t.Fatal(err)
	}
	agent := "/usr/bin/true" // PATH=/usr/bin:/bin
	want := []string{"/opt/marshal-confine", "exec", "--socket", "/run/egress.sock", "--port", "3128", "--attempt", plan.Attempt,
		"--argv0", "true", "--", agent}
	if plan.Path != "/opt/marshal-confine" || plan.Attempt == "" || !slices.Equal(plan.Argv, want) {
		t.Errorf("plan %s %q, want %q", plan.Path, plan.Argv, want)
	}
	if !slices.Contains(plan.Env, EnvIsolation+"=netns") {
		t.Errorf("env %q, want %s=netns", plan.Env, EnvIsolation)
	}
	info, ok := h.l.Info(plan.ID)
	if !ok || !info.Isolated {
		t.Errorf("Info = %+v, want the launch isolated", info)
	}
	recs, err := h.store.List(t.Context())
	if err != nil || len(recs) != 1 || recs[0].Isolation != v1alpha1.IsolationNetns {
		t.Errorf("records %+v, %v: want one, isolation netns", recs, err)
	}
	// The caller has not made its namespace: it is in the host's, which
	// is not the launch's.
	host, err := identity.SelfNetNS()
	if err != nil {
		t.Fatal(err)
	}
	if ns, ok := h.l.NetNS(plan.ID, host); ok {
		t.Errorf("NetNS before the namespace is made = %v, want none", ns)
	}
	if ns, ok := h.l.NetNS(plan.ID, identity.NetNS{Dev: 1, Ino: 1}); !ok || ns != host {
		t.Errorf("NetNS = %v %v, want the caller's namespace, %v", ns, ok, host)
	}
}

// scopeFault is the backend with CreateScope failing with err: a fault
// the real tree cannot be made to show to root on demand.
type scopeFault struct {
	Scopes
	err error
}

func (f scopeFault) CreateScope(context.Context, string, string, int, cgroup.Limits) (cgroup.Scope, cgroup.Applied, error) {
	return cgroup.Scope{}, cgroup.Applied{}, f.err
}

// A scope that cannot be made says why in the refusal, file and errno,
// as the backend reported it, not a bare "scope not created".
func TestScopePermissionErrorReachesTheRefusal(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationNone, 2)
	// What cgroup.MoveProcess returns when the caller's group is not
	// writable by marshald (user mode without a delegated tree).
	denied := &fs.PathError{Op: "write", Path: "/sys/fs/cgroup/user.slice/marshal.slice/marshal-coder.slice/x.scope/cgroup.procs", Err: syscall.EACCES}
	h.wrapScopes = func(s Scopes) Scopes {
		return scopeFault{Scopes: s, err: fmt.Errorf("moving pid 1: writing %q: %w", "1", denied)}
	}
	h.start()
	_, p := h.caller()
	_, err := h.run(h.request("web"), p)
	r := refusal(t, err, CodeInternal, StateNotAsked)
	if want := "scope not created: write cgroup.procs: permission denied (EACCES)"; r.Detail != want {
		t.Errorf("detail = %q, want %q", r.Detail, want)
	}
}
