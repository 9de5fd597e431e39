package egress

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/reconcile"
)

func TestDenialsAreCountedPerDestinationAndWindow(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec, _ := events.New(events.Options{Clock: clk})
	a := newAggregator(rec, clk)
	denial := &Record{Scope: "marshal-coder-x.scope", Profile: "coder", Workspace: "webapp", Host: "evil.test", Port: 443,
		Verdict: VerdictDeny, Reason: "default"}
	other := *denial
	other.Host = "worse.test"
	ws := reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: "webapp"}
	counts := func() map[string]int64 {
		evs, _ := rec.List(ws, 0)
		out := map[string]int64{}
		for _, e := range evs {
			out[e.Message] += e.Count
		}
		return out
	}

	for range 3 {
		a.denied(denial)
	}
	a.denied(&other)
	if next := a.flush(false); !next.IsZero() {
		t.Errorf("flush left something for %v; the first of each event is recorded at once", next)
	}
	if got := counts(); len(got) != 2 || got["denied evil.test:443 for marshal-coder-x.scope (profile coder): default"] != 3 {
		t.Fatalf("events = %v, want evil.test counted 3 times and worse.test once", got)
	}
	clk.SetTime(time.Unix(1000, 5e8))
	a.denied(denial)
	a.denied(denial)
	if next := a.flush(false); !next.Equal(time.Unix(1001, 0)) {
		t.Errorf("repeats within the window wait until %v, want the window's end", next)
	}
	if got := counts()["denied evil.test:443 for marshal-coder-x.scope (profile coder): default"]; got != 3 {
		t.Errorf("count = %d before the window ended, want 3", got)
	}
	clk.SetTime(time.Unix(1001, 0))
	a.flush(false)
	if got := counts()["denied evil.test:443 for marshal-coder-x.scope (profile coder): default"]; got != 5 {
		t.Errorf("count = %d after the window, want 5", got)
	}
	// A peer in no launch has no workspace: the audit log has it.
	a.denied(&Record{Host: "x.test", Verdict: VerdictDeny, Reason: ReasonUnscoped})
	if a.flush(true); len(counts()) != 2 {
		t.Errorf("an unscoped denial made an event: %v", counts())
	}
}
