package events

import (
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

var coder = reconcile.Key{Kind: "Profile", Name: "coder"}

func TestRepeatsAreCountedAndPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	r, err := New(Options{Store: db, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r.Warning(coder, "Invalid", "x.yaml:3: bad")
	clk.SetTime(time.Unix(1010, 0))
	r.Normal(coder, "Ready", "slice ensured")
	r.Warning(coder, "Invalid", "x.yaml:3: bad")

	got, _ := r.List(reconcile.Key{}, 0)
	if len(got) != 2 || got[1].Reason != "Invalid" || got[1].Count != 2 || !got[1].FirstSeen.Equal(time.Unix(1000, 0)) {
		t.Fatalf("events = %+v, want Ready then Invalid counted twice since t=1000", got)
	}
	db.Close()

	db, err = state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r2, err := New(Options{Store: db, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := r2.List(coder, 0)
	if len(again) != 2 || again[1].Count != 2 || again[1].Seq != got[1].Seq {
		t.Fatalf("after reopen events = %+v, want %+v", again, got)
	}
	r2.Warning(coder, "Invalid", "x.yaml:3: bad")
	last, _ := r2.List(coder, got[1].Seq)
	if len(last) != 1 || last[0].Count != 3 {
		t.Fatalf("repeat after reopen = %+v, want count 3", last)
	}
}

func TestKeepBoundsTheEvents(t *testing.T) {
	r, _ := New(Options{Keep: 3})
	for _, reason := range []string{"A", "B", "C", "D", "E"} {
		r.Normal(coder, reason, reason)
	}
	got, _ := r.List(reconcile.Key{}, 0)
	if len(got) != 3 || got[0].Reason != "C" || got[2].Reason != "E" {
		t.Fatalf("events = %+v, want C D E", got)
	}
}

func TestListWakesWaiters(t *testing.T) {
	r, _ := New(Options{})
	_, changed := r.List(reconcile.Key{}, 0)
	r.Record(v1alpha1.EventNormal, coder, "Ready", "ok")
	select {
	case <-changed:
	default:
		t.Fatal("recording did not close the changed channel")
	}
}

func TestWarningNCountsABurstAtOnce(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	r, _ := New(Options{Clock: clk})
	ws := reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: "webapp"}
	r.WarningN(ws, "EgressDenied", "denied evil.example:443", 5)
	clk.SetTime(time.Unix(1001, 0))
	r.Warning(ws, "EgressDenied", "denied evil.example:443")
	r.WarningN(ws, "EgressDenied", "denied evil.example:443", 0)
	got, _ := r.List(ws, 0)
	if len(got) != 1 || got[0].Count != 6 || got[0].Type != v1alpha1.EventWarning || !got[0].FirstSeen.Equal(time.Unix(1000, 0)) {
		t.Fatalf("events = %+v, want one Warning counted 6 times since t=1000", got)
	}
}
