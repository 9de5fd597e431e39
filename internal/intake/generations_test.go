package intake

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// These tests run the declarer on a real state database. The background
// writer runs only where a test says so: where it does not, the disk is
// as far behind as it can be, and only what must be durable before a
// generation is shown is.

var (
	coderKey  = reconcile.Key{Kind: "Profile", Name: "coder"}
	testStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// run is one run of marshald's declarer on the state file at path.
type declarerRun struct {
	t      *testing.T
	db     *state.DB
	stores *controllers.Stores
	decl   *Declarer
}

func openDeclarer(t *testing.T, path string) *declarerRun {
	t.Helper()
	db, err := state.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	stores := controllers.NewStores()
	clk := clocktesting.NewFakePassiveClock(testStart)
	decl, err := NewDeclarer(stores, db, clk, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return &declarerRun{t: t, db: db, stores: stores, decl: decl}
}

// declare declares the Profile coder with a tasks limit and returns the
// generation shown.
func (r *declarerRun) declare(tasks int64) int64 {
	r.t.Helper()
	p := &v1alpha1.Profile{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Profile"},
		Metadata: v1alpha1.ObjectMeta{Name: "coder"},
		Spec:     v1alpha1.ProfileSpec{Limits: &v1alpha1.Limits{Tasks: &tasks}},
	}
	r.decl.Declare([]Change{{Key: coderKey, Declaration: &Declaration{Object: p, File: "coder.yaml", Line: 1}}})
	return r.shown()
}

func (r *declarerRun) shown() int64 {
	r.t.Helper()
	obj, ok := r.stores.Desired.Get(coderKey)
	if !ok {
		r.t.Fatal("coder is not declared")
	}
	return obj.GetObjectMeta().Generation
}

// durable returns the generation coder's record holds on disk, 0 for
// none.
func (r *declarerRun) durable() int64 {
	r.t.Helper()
	v, err := r.db.Get(state.Generations, coderKey.String())
	if err != nil {
		r.t.Fatal(err)
	}
	if v == nil {
		return 0
	}
	var g generation
	if err := json.Unmarshal(v, &g); err != nil {
		r.t.Fatal(err)
	}
	return g.Generation
}

// crash ends the run without the writer's last transaction.
func (r *declarerRun) crash() { r.db.Close() }

// stop runs the writer's last transaction, as a clean stop does.
func (r *declarerRun) stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.decl.Run(ctx)
	r.db.Close()
}

// A new object is shown only once its record is durable, and so is an
// edit made before the running mark is: until then nothing may run
// ahead of its record.
func TestGenerationDurableBeforeTheRunningMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	r := openDeclarer(t, path)
	if gen := r.declare(8); gen != 1 || r.durable() != 1 {
		t.Fatalf("a new object shown at generation %d with its record at %d, want both 1", gen, r.durable())
	}
	r.stop()

	// After a clean stop no mark is left: the first edit waits for it.
	r = openDeclarer(t, path)
	if gen := r.declare(9); gen != 2 || r.durable() != 2 {
		t.Fatalf("an edit before the running mark shown at generation %d with its record at %d, want both 2", gen, r.durable())
	}
	if gen := r.declare(10); gen != 3 || r.durable() != 2 {
		t.Fatalf("an edit after the running mark shown at generation %d with its record at %d, want 3 and 2", gen, r.durable())
	}
}

// Once the running mark is durable, an edit is shown at once, its record
// written later; it never runs more than generationsAhead ahead of its
// durable record.
func TestGenerationRunsAheadOfItsRecordBoundedly(t *testing.T) {
	r := openDeclarer(t, filepath.Join(t.TempDir(), "state.db"))
	r.declare(0)
	if err := r.decl.writer.write(false); err != nil {
		t.Fatal(err)
	}
	waited := 0
	for i := int64(1); i <= 2*generationsAhead+10; i++ {
		before := r.durable()
		gen := r.declare(i % 2)
		if gen != i+1 {
			t.Fatalf("edit %d shown at generation %d, want %d", i, gen, i+1)
		}
		if d := r.durable(); gen > d+generationsAhead {
			t.Fatalf("generation %d shown with its record at %d: more than %d ahead", gen, d, generationsAhead)
		} else if d != before {
			waited++
		}
	}
	// The disk is never written in the background here: an edit waited
	// once the window was used up, and only then.
	if want := 2; waited != want {
		t.Errorf("%d edits waited for their record, want %d", waited, want)
	}
}

// A crash after generations ran ahead of their records loses none that
// was shown: the next start moves every object beyond them, and a clean
// stop after it keeps the exact count.
func TestGenerationNeverReusedAfterACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	r := openDeclarer(t, path)
	r.declare(8)
	r.decl.writer.write(false)
	var seen int64
	for i := range int64(5) {
		seen = r.declare(9 + i%2)
	}
	if d := r.durable(); d >= seen {
		t.Fatalf("the record is at %d, the shown generation %d: the test wants it behind", d, seen)
	}
	r.crash()

	// The same spec as the last shown, and the first one: neither may
	// get a generation seen before.
	r = openDeclarer(t, path)
	after := r.declare(8)
	if after <= seen || after > seen+generationsAhead+1 {
		t.Fatalf("after a crash at generation %d shown, the next is %d, want in (%d, %d]", seen, after, seen, seen+generationsAhead+1)
	}
	if d := r.durable(); d != after {
		t.Fatalf("the first generation after a crash is shown with its record at %d, want %d", d, after)
	}
	edited := r.declare(9)
	r.stop()

	r = openDeclarer(t, path)
	if gen := r.declare(9); gen != edited {
		t.Fatalf("after a clean stop the same spec is at generation %d, want %d", gen, edited)
	}
	if gen := r.declare(10); gen != edited+1 {
		t.Fatalf("an edit after a clean stop is at generation %d, want %d", gen, edited+1)
	}
}

// A state disk that refuses the record of a new object does not keep the
// object from being declared; the record is written with the next
// commit that succeeds.
func TestGenerationShownWhenTheDiskRefuses(t *testing.T) {
	dir := t.TempDir()
	r := openDeclarer(t, filepath.Join(dir, "state.db"))
	// The writer of another state file: the first commit fails, the next
	// finds the file.
	other, err := state.Open(filepath.Join(dir, "other.db"))
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	r.decl.writer.db = other
	if gen := r.declare(8); gen != 1 {
		t.Fatalf("a new object on a refusing disk shown at generation %d, want 1", gen)
	}
	if len(r.decl.writer.pending) != 1 {
		t.Fatalf("pending after a failed commit = %v, want the record", r.decl.writer.pending)
	}
	r.decl.writer.db = r.db
	if err := r.decl.writer.write(false); err != nil {
		t.Fatal(err)
	}
	if d := r.durable(); d != 1 {
		t.Fatalf("the record after the disk took it = %d, want 1", d)
	}
}
