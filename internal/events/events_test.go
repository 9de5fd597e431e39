package events

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

var coder = reconcile.Key{Kind: "Profile", Name: "coder"}

// running runs r.Run until the returned stop, which returns once Run has
// written everything.
func running(r *Recorder) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

func TestRepeatsAreCountedAndPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	r, err := New(Options{Store: db, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	stop := running(r)
	r.Warning(coder, "Invalid", "x.yaml:3: bad")
	clk.SetTime(time.Unix(1010, 0))
	r.Normal(coder, "Ready", "slice ensured")
	r.Warning(coder, "Invalid", "x.yaml:3: bad")

	got, _ := r.List(reconcile.Key{}, 0)
	if len(got) != 2 || got[1].Reason != "Invalid" || got[1].Count != 2 || !got[1].FirstSeen.Equal(time.Unix(1000, 0)) {
		t.Fatalf("events = %+v, want Ready then Invalid counted twice since t=1000", got)
	}
	stop()
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
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
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

// stalledStore is a state database whose disk stalls: each WriteSeq
// waits until release is closed.
type stalledStore struct {
	*state.DB
	writing chan struct{} // receives when a write begins
	release chan struct{}
}

func (s *stalledStore) WriteSeq(b state.Bucket, puts map[uint64][]byte, keep int) error {
	s.writing <- struct{}{}
	<-s.release
	return s.DB.WriteSeq(b, puts, keep)
}

// While Run runs, recording an event never waits for the disk; the
// events reach it in order, and all of them once Run ends.
func TestRunWritesInTheBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	store := &stalledStore{DB: db, writing: make(chan struct{}, 16), release: make(chan struct{})}
	r, err := New(Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	// An event recorded before Run is written when it begins, and stalls.
	r.Normal(coder, "A", "a")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		r.Run(ctx)
	}()
	select {
	case <-store.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not begin writing the first event")
	}
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		r.Normal(coder, "B", "b")
		r.Warning(coder, "C", "c")
		r.Normal(coder, "A", "a") // a repeat: moves A to the end
	}()
	select {
	case <-recorded:
	case <-time.After(10 * time.Second):
		t.Fatal("recording waited for the stalled disk")
	}
	if got, _ := r.List(reconcile.Key{}, 0); len(got) != 3 || got[2].Reason != "A" || got[2].Count != 2 {
		t.Fatalf("listed while the disk stalls = %+v, want B C A(2)", got)
	}
	close(store.release)
	cancel()
	<-ran
	db.Close()

	db, err = state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r2, err := New(Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r2.List(reconcile.Key{}, 0)
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, fmt.Sprintf("%s%d@%d", e.Reason, e.Count, e.Seq))
	}
	if fmt.Sprint(reasons) != "[B1@2 C1@3 A2@4]" {
		t.Errorf("persisted = %v, want [B1@2 C1@3 A2@4]", reasons)
	}
	r2.Normal(coder, "D", "d")
	if last, _ := r2.List(reconcile.Key{}, 4); len(last) != 1 || last[0].Seq != 5 {
		t.Errorf("after reopen = %+v, want D at seq 5", last)
	}
}

// sizedStore is a state database that tells the size of each batch it
// is given to write.
type sizedStore struct {
	*state.DB
	batches chan int
}

func (s *sizedStore) WriteSeq(b state.Bucket, puts map[uint64][]byte, keep int) error {
	s.batches <- len(puts)
	return s.DB.WriteSeq(b, puts, keep)
}

// timingClock is a fake clock that tells each timer made of it.
type timingClock struct {
	*clocktesting.FakeClock
	timers chan time.Duration
}

func (c *timingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers <- d
	return t
}

// With a WriteDelay, Run writes the events recorded before it began at
// once, those recorded since in one batch once the delay has passed, and
// what is still pending when it ends.
func TestRunGathersEventsForTheWriteDelay(t *testing.T) {
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &sizedStore{DB: db, batches: make(chan int, 16)}
	clk := &timingClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1000, 0)), timers: make(chan time.Duration, 16)}
	r, err := New(Options{Store: store, Clock: clk, WriteDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(what string) int {
		t.Helper()
		select {
		case n := <-store.batches:
			return n
		case <-time.After(testutil.Deadline):
			t.Fatalf("Run did not write %s", what)
			return 0
		}
	}
	r.Normal(coder, "A", "a")
	stop := running(r)
	if n := batch("the event recorded before it began"); n != 1 {
		t.Fatalf("the first batch holds %d events, want A alone", n)
	}
	r.Normal(coder, "B", "b")
	select {
	case d := <-clk.timers:
		if d != time.Second {
			t.Fatalf("Run waits %v, want the write delay, 1s", d)
		}
	case n := <-store.batches:
		t.Fatalf("Run wrote %d event(s) before the write delay passed", n)
	case <-time.After(testutil.Deadline):
		t.Fatal("Run did not wait for the write delay")
	}
	r.Warning(coder, "C", "c")
	select {
	case n := <-store.batches:
		t.Fatalf("Run wrote %d event(s) before the write delay passed", n)
	default:
	}
	clk.Step(time.Second)
	if n := batch("once the write delay passed"); n != 2 {
		t.Errorf("the batch after the delay holds %d events, want B and C", n)
	}
	r.Normal(coder, "D", "d")
	stop()
	if n := batch("what was pending at its end"); n != 1 {
		t.Errorf("the batch written at the end holds %d events, want D alone", n)
	}
}
