package launch

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// endedAndRemoved launches attempt id through a helper, ends it, and
// removes its emptied scope as systemd does, before anything reported it
// empty; it returns the scope as the agent controller then knows it
// (gone: no path).
func endedAndRemoved(t *testing.T, h *harness, p admission.Principal, id string) (admission.AttemptKey, cgroup.Scope) {
	t.Helper()
	key, _, c, _ := h.launchHelper(p, id)
	sc := removeEnded(t, h, key, c)
	sc.Path = ""
	return key, sc
}

// removeEnded ends the helper c of key's launch, waits for its scope to
// empty and removes it, and returns the scope as it was.
func removeEnded(t *testing.T, h *harness, key admission.AttemptKey, c *caller) cgroup.Scope {
	t.Helper()
	c.exit(t)
	lid := key.ID()
	sc := cgroup.Scope{Name: scope.ScopeName("coder", lid), Profile: "coder", ID: lid}
	h.l.mu.Lock()
	sc.Path = h.l.launches[lid].path
	h.l.mu.Unlock()
	testutil.Eventually(t, h.changed, func() bool {
		events, err := cgroup.ReadEvents(filepath.Join(h.mount, sc.Path))
		return err == nil && !events.Populated
	}, "the helper's scope to empty")
	if err := h.backend.RemoveScope(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.mount, sc.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the scope is still there: %v", err)
	}
	return sc
}

// A charged launch whose scope is gone before anything saw it empty is
// not judged lost at once: the tree observer's report of it may still
// come (a systemd scope removes itself as soon as it is empty). Settle
// says when to ask again, and the report, when it comes, releases the
// attempt.
func TestSettleAwaitsTheReportOfAScopeGoneUnseen(t *testing.T) {
	h, p := helperHarness(t)
	key, sc := endedAndRemoved(t, h, p, "unseen")
	over, retry, err := h.l.Settle(t.Context(), sc, time.Time{})
	if err != nil || over || retry != awaitReportFor {
		t.Fatalf("Settle of a scope gone unseen = %v, %v, %v; want not over, retry in %v", over, retry, err, awaitReportFor)
	}
	if r := h.lookupAs(p, key); r.Phase != admission.PhaseRunAuthorized || r.ScopeLost {
		t.Fatalf("while the report is awaited: %s, lost %v; want run_authorized", r.Phase, r.ScopeLost)
	}
	h.clock.Step(time.Second)
	if _, retry, _ := h.l.Settle(t.Context(), sc, time.Time{}); retry != awaitReportFor-time.Second {
		t.Errorf("Settle a second later: retry in %v, want %v", retry, awaitReportFor-time.Second)
	}
	// The observer reports the scope seen empty now.
	over, retry, err = h.l.Settle(t.Context(), sc, h.clock.Now())
	if err != nil || !over || retry != 0 {
		t.Fatalf("Settle on the report = %v, %v, %v; want over", over, retry, err)
	}
	if r := h.lookupAs(p, key); r.Phase != admission.PhaseReleased || r.ScopeLost {
		t.Errorf("after the report: %s, lost %v; want released", r.Phase, r.ScopeLost)
	}
}

// No report within awaitReportFor: the scope is lost, the attempt
// suspect and still charged, as before.
func TestSettleJudgesAScopeLostWhenNoReportComes(t *testing.T) {
	h, p := helperHarness(t)
	key, sc := endedAndRemoved(t, h, p, "lost")
	if over, retry, err := h.l.Settle(t.Context(), sc, time.Time{}); err != nil || over || retry == 0 {
		t.Fatalf("Settle of a scope gone unseen = %v, %v, %v; want not over, a retry", over, retry, err)
	}
	h.clock.Step(awaitReportFor)
	over, retry, err := h.l.Settle(t.Context(), sc, time.Time{})
	if err != nil || !over || retry != 0 {
		t.Fatalf("Settle once the wait is over = %v, %v, %v; want over", over, retry, err)
	}
	if r := h.lookupAs(p, key); r.Phase != admission.PhaseSuspect || !r.ScopeLost {
		t.Errorf("no report came: %s, lost %v; want suspect with its tracking lost", r.Phase, r.ScopeLost)
	}
}
