package admission

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// A journal on a file system that fills up refuses what it cannot record,
// answers everything else, says why, and admits again by itself once
// space returns; after a restart it holds exactly what was answered. With
// its log, commits go on until the log is full and its checkpoint must
// grow the journal; without one, until a commit must grow it.
func TestFullStateDiskRefusesThenResumes(t *testing.T) {
	t.Run("log", func(t *testing.T) { testFullStateDisk(t, true) })
	t.Run("no_log", func(t *testing.T) { testFullStateDisk(t, false) })
}

func testFullStateDisk(t *testing.T, withLog bool) {
	fs := testutil.NewTmpfs(t, 4<<20)
	h := newHarnessAt(t, filepath.Join(fs.Dir, "admission.db"))
	h.capacity = capacityOf(Budget{CPUMilli: MaxQuantity, MemoryBytes: MaxQuantity, Tasks: MaxQuantity})
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if !withLog {
		// The log cannot be made where a directory stands in its place.
		if err := os.Remove(h.path + walSuffix); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(h.path+walSuffix, "in-the-way"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h.open()
	if (h.a.wal != nil) != withLog {
		t.Fatalf("log open = %v, want %v", h.a.wal != nil, withLog)
	}
	p := h.ready()
	ctx := t.Context()

	// An attempt bound to its scope before the disk fills, to be released
	// while it is full, and one prepared.
	bound, _ := h.bound(p, key(1))
	h.prepare(p, key(2))
	want := map[string]Phase{key(1): PhaseScopeBound, key(2): PhasePrepared}

	filler := fs.Fill(t, "filler")
	var failedKey string
	for n := 100; n < 100000; n++ {
		r, err := h.a.Admit(ctx, p, key(n), meaning, job)
		if err != nil {
			wantErr(t, "Admit on a full disk", err, ErrJournalFailed)
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Admit on a full disk = %v, want ENOSPC, nothing recorded", err)
			}
			failedKey = key(n)
			break
		}
		// Until the journal must grow, a commit fits in pages it freed.
		want[r.ID] = r.Phase
	}
	if failedKey == "" {
		t.Fatal("the journal never hit the full disk")
	}
	s := h.a.Snapshot()
	if s.Ready || s.NotReady != NotReadyJournalFull || s.JournalFailedAt.IsZero() {
		t.Fatalf("snapshot on a full disk = ready %v, %q since %v; want journal_full since a moment", s.Ready, s.NotReady, s.JournalFailedAt)
	}
	if got := charged(want); s.Committed != got {
		t.Fatalf("committed on a full disk = %+v, the answered attempts hold %+v", s.Committed, got)
	}
	// Reads are answered; a failed attempt is not known.
	if r := h.lookup(p, key(2)); r.Phase != PhasePrepared {
		t.Fatalf("Lookup on a full disk = %s, want prepared", r.Phase)
	}
	_, err := h.a.Lookup(ctx, p, failedKey)
	wantErr(t, "Lookup of the refused attempt", err, ErrNotFound)
	// The scope ended while the disk was full: its release may not be
	// recorded now, and is not lost.
	ev := h.evidence(key(1), false, true)
	if r, err := h.a.Reconcile(ctx, key(1), ev); err == nil {
		want[key(1)] = r.Phase
	} else {
		wantErr(t, "Reconcile on a full disk", err, ErrJournalFailed)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The next request is the next try: no restart, no waiting.
	r := h.prepare(p, failedKey)
	want[r.ID] = r.Phase
	if s := h.a.Snapshot(); !s.Ready || s.NotReady != "" || !s.JournalFailedAt.IsZero() {
		t.Fatalf("snapshot after space returned = ready %v, %q; want ready", s.Ready, s.NotReady)
	}
	if r := h.reconcile(key(1), h.evidence(key(1), false, true)); r.Phase != PhaseReleased {
		t.Fatalf("release after space returned = %s, want released", r.Phase)
	}
	want[key(1)] = PhaseReleased
	if bound.Phase != PhaseScopeBound {
		t.Fatalf("bound attempt = %s", bound.Phase)
	}
	if got := charged(want); h.committed() != got {
		t.Fatalf("committed after space returned = %+v, the answered attempts hold %+v", h.committed(), got)
	}

	// A restart finds exactly what was answered, with consistent totals.
	before := h.committed()
	h.restart()
	recs := allRecords(t, h)
	if len(recs) != len(want) {
		t.Fatalf("journal holds %d attempts after restart, %d were answered", len(recs), len(want))
	}
	for id, ph := range want {
		if recs[id].Phase != ph {
			t.Fatalf("attempt %s = %s after restart, was answered %s", id, recs[id].Phase, ph)
		}
	}
	if h.committed() != before {
		t.Fatalf("committed after restart = %+v, before %+v", h.committed(), before)
	}
}

// charged adds up what attempts in these phases hold, each asking for
// job.
func charged(phases map[string]Phase) Budget {
	var b Budget
	for _, ph := range phases {
		if ph.Charged() {
			b = b.Add(job.Requested)
		}
	}
	return b
}
