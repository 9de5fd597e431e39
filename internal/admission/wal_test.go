package admission

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// logOf lays entries out as the log does, from sequence first under salt.
func logOf(salt, first uint64, entries ...[]put) (data []byte, starts []int) {
	w := &wal{state: walState{salt: salt, seq: first - 1}}
	data = make([]byte, walSize)
	for _, puts := range entries {
		w.encode(puts)
		sealEntry(w.buf, w.state.salt, w.state.seq+1)
		starts = append(starts, int(w.off))
		copy(data[w.off:], w.buf)
		w.state.seq++
		w.off += entryLen(len(w.buf) - walHeader)
	}
	return data, append(starts, int(w.off))
}

func attemptPut(seq uint64, value string) put {
	return put{walAttempts, attemptKey(seq), []byte(value)}
}

// An entry counts only whole, under the journal's salt, with the next
// sequence: a write torn at any byte, the zeroes of a new log, garbage,
// another cycle's entries and an entry the journal already holds all end
// the log, and what comes before them replays.
func TestLogReplaysExactlyTheWholeEntries(t *testing.T) {
	const salt = 0x5eed
	entries := [][]put{
		{attemptPut(1, "one"), {walMeta, keyTotals, []byte(`{"count":1}`)}},
		{attemptPut(1, "one, later"), attemptPut(2, "two")},
		{{walOwners, []byte("runner"), bytes.Repeat([]byte("o"), 5000)}, attemptPut(3, "three")},
	}
	data, starts := logOf(salt, 8, entries...)
	replay := func(data []byte, st walState) (walPending, uint64) {
		t.Helper()
		p, seq, err := replayLog(data, st)
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		return p, seq
	}
	whole := walPending{}
	for _, e := range entries {
		whole.add(e)
	}
	if p, seq := replay(data, walState{salt, 7}); seq != 10 || !samePending(p, whole) {
		t.Fatalf("whole log replays to %d with %v, want 10 with every entry", seq, p)
	}
	firstTwo := walPending{}
	firstTwo.add(entries[0])
	firstTwo.add(entries[1])
	last, end := starts[2], starts[2]+walHeader+len(encodePuts(nil, entries[2]))
	for cut := last; cut < end; cut++ {
		for _, fill := range []byte{0, 0xff} {
			torn := bytes.Clone(data)
			for i := cut; i < end; i++ {
				torn[i] = fill
			}
			if p, seq := replay(torn, walState{salt, 7}); seq != 9 || !samePending(p, firstTwo) {
				t.Fatalf("write torn at byte %d (filled with %#x) replays to %d, want the two whole entries", cut-last, fill, seq)
			}
		}
	}
	if p, seq := replay(data, walState{salt + 1, 7}); seq != 7 || len(p) != 0 {
		t.Fatalf("another salt's log replays to %d, %d keys; want nothing", seq, len(p))
	}
	if p, seq := replay(data, walState{salt, 8}); seq != 8 || len(p) != 0 {
		t.Fatalf("a log the journal holds the first entry of replays to %d, %d keys; want nothing", seq, len(p))
	}
	if p, seq := replay(make([]byte, walSize), walState{salt, 7}); seq != 7 || len(p) != 0 {
		t.Fatalf("a new log replays to %d, %d keys; want nothing", seq, len(p))
	}
	// A new cycle over an old one: the old entries after the new end it.
	newer, _ := logOf(salt+1, 11, entries[0])
	copy(data, newer[:starts[1]])
	if p, seq := replay(data, walState{salt + 1, 10}); seq != 11 || len(p) != 2 {
		t.Fatalf("a new cycle over an old replays to %d, %d keys; want its one entry", seq, len(p))
	}
	// A whole entry of the right salt that does not decode is damage.
	bad, _ := logOf(salt, 1, []put{{9, []byte("k"), []byte("v")}})
	if _, _, err := replayLog(bad, walState{salt, 0}); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("replay of an entry naming no bucket = %v, want %v", err, ErrJournalCorrupt)
	}
}

func samePending(a, b walPending) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// crashImage copies the journal and its log as a kill would leave them
// (every write the authority made is in the files) and opens the copy.
// The writer must be idle: a copy made while it writes is no state a
// kill could leave.
func crashImage(t *testing.T, h *harness) *Authority {
	t.Helper()
	dir := t.TempDir()
	for _, suffix := range []string{"", walSuffix} {
		data, err := os.ReadFile(h.path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "admission.db"+suffix), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Open(filepath.Join(dir, "admission.db"), Options{Inspector: h.insp, Clock: h.clock})
	if err != nil {
		t.Fatalf("opening the crash image: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// imageRecords is what a's journal file holds: all it holds once Open or
// a checkpoint brought it up to date with the log.
func imageRecords(t *testing.T, a *Authority) map[string]Record {
	t.Helper()
	var got map[string]Record
	if err := a.db.View(func(tx *bolt.Tx) (err error) {
		got, _, err = storedRecords(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// A kill between any two commits, across the log's checkpoints, leaves a
// journal and log that open with every answered attempt as answered and
// nothing else, and totals that add up.
func TestEveryCrashImageHoldsWhatWasAnswered(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: MaxQuantity, MemoryBytes: MaxQuantity, Tasks: MaxQuantity})
	h.restart()
	p := h.ready()
	answered := map[string]Phase{}
	for n := 0; h.a.checkpoints.Load() < 2; n++ {
		before := h.a.checkpoints.Load()
		switch n % 3 {
		case 0, 1:
			answered[key(n)] = h.prepare(p, key(n)).Phase
		case 2:
			r, err := h.a.Cancel(t.Context(), p, key(n-1))
			if err != nil {
				t.Fatal(err)
			}
			answered[key(n-1)] = r.Phase
		}
		h.idle()
		if n%17 != 0 && h.a.checkpoints.Load() == before {
			continue // every checkpoint and every 17th commit is imaged
		}
		img := crashImage(t, h)
		got := imageRecords(t, img)
		if len(got) != len(answered) {
			t.Fatalf("after commit %d: the image holds %d attempts, %d were answered", n, len(got), len(answered))
		}
		var want Budget
		for id, ph := range answered {
			if got[id].Phase != ph {
				t.Fatalf("after commit %d: %s is %s in the image, was answered %s", n, id, got[id].Phase, ph)
			}
			if ph.Charged() {
				want = want.Add(job.Requested)
			}
		}
		if s := img.Snapshot(); s.Committed != want {
			t.Fatalf("after commit %d: the image's totals %+v, the answers hold %+v", n, s.Committed, want)
		}
		img.Close()
	}
}

// A log entry whose write fails has an unknown outcome: the authority is
// fenced, and the next start judges the log.
func TestLogWriteFailureFencesTheAuthority(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	ro, err := os.Open(h.path + walSuffix)
	if err != nil {
		t.Fatal(err)
	}
	rw := h.a.wal.f
	h.a.wal.f = ro // a write to it fails, as a failing disk's would
	_, err = h.a.Admit(t.Context(), p, key(2), meaning, job)
	wantErr(t, "Admit whose log write fails", err, ErrOutcomeUnknown)
	if s := h.a.Snapshot(); s.Ready || s.NotReady != NotReadyJournalUnknown {
		t.Fatalf("snapshot = ready %v, %q; want journal_unknown", s.Ready, s.NotReady)
	}
	_, err = h.a.Admit(t.Context(), p, key(3), meaning, job)
	wantErr(t, "Admit once fenced", err, ErrJournalFailed)
	rw.Close()
	h.restart()
	p = h.ready()
	if r := h.lookup(p, key(1)); r.Phase != PhasePrepared {
		t.Fatalf("after reopening, attempt = %s, want prepared", r.Phase)
	}
	_, err = h.a.Lookup(t.Context(), p, key(2))
	wantErr(t, "Lookup of the attempt whose write failed", err, ErrNotFound)
}

// A journal of schema 3, which had no log, opens as schema 4 with one,
// every record kept; without a log, commits go to the journal itself.
func TestJournalWithoutALogGainsOne(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(h.path + walSuffix); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(h.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyWAL); err != nil {
			return err
		}
		return meta.Put(keySchema, []byte(schemaWithoutLog))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// The log cannot be made where a directory stands in its place.
	if err := os.MkdirAll(filepath.Join(h.path+walSuffix, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	h.open()
	if h.a.wal != nil || h.a.LogError() == nil {
		t.Fatalf("log = %v, error %v where a directory stands; want none, and why", h.a.wal, h.a.LogError())
	}
	p = h.ready()
	before := h.journalTxid()
	h.prepare(p, key(2))
	if h.journalTxid() != before+1 {
		t.Fatal("without a log, a commit is not the journal's own")
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(h.path + walSuffix); err != nil {
		t.Fatal(err)
	}
	h.open()
	if st, err := os.Stat(h.path + walSuffix); err != nil || st.Size() != walSize || h.a.wal == nil || h.a.LogError() != nil {
		t.Fatalf("log after reopening: %v, %v, %v; want %d bytes, open", st, err, h.a.LogError(), walSize)
	}
	if err := h.a.db.View(func(tx *bolt.Tx) error {
		if s := string(tx.Bucket(bucketMeta).Get(keySchema)); s != SchemaVersion {
			return fmt.Errorf("schema %q, want %s", s, SchemaVersion)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p = h.ready()
	for _, k := range []string{key(1), key(2)} {
		if r := h.lookup(p, k); r.Phase != PhasePrepared {
			t.Fatalf("%s after gaining a log = %s, want prepared", k, r.Phase)
		}
	}
}

// A backup restored in the journal's place, beside the live journal's
// log, holds what it held: the log's entries after the backup are the
// live journal's, not the copy's.
func TestRestoredBackupIgnoresTheLiveLog(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: MaxQuantity, MemoryBytes: MaxQuantity, Tasks: MaxQuantity})
	h.restart()
	p := h.ready()
	h.prepare(p, key(1))
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := h.a.BackupFile(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	h.prepare(p, key(2))
	h.prepare(p, key(3))
	if h.a.wal.off == 0 {
		t.Fatal("the commits after the backup are not in the log")
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	live, err := os.ReadFile(h.path + walSuffix)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	restored := filepath.Join(dir, "admission.db")
	if err := os.WriteFile(restored, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored+walSuffix, live, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(restored, Options{Inspector: h.insp, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := imageRecords(t, a)
	if len(got) != 1 || got[key(1)].Phase != PhasePrepared {
		t.Fatalf("restored backup holds %d attempts, want the one before the backup", len(got))
	}
}

// A fenced authority does not take up its log: the journal is left as the
// fence found it, for the next start to judge.
func TestFencedAuthorityLeavesItsLog(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: MaxQuantity, MemoryBytes: MaxQuantity, Tasks: MaxQuantity})
	h.restart()
	p := h.ready()
	for n := 0; h.a.wal.off < logFull-walPage; n++ {
		h.prepare(p, key(n))
	}
	if h.a.checkpoints.Load() != 0 {
		t.Fatal("the log was taken up before it was full")
	}
	txid := h.journalTxid()
	// The batch that fills the log is fenced before it commits: it is
	// answered, and the log is not taken up after it.
	err := h.onWriter(func(b *batch) {
		b.putOwner(ownerRecord{Name: "other", Generation: 1, Process: Process{UID: 1000, PID: 200, BootID: "boot-a"}})
		h.a.commitFailed(fmt.Errorf("fdatasync: %w", os.ErrInvalid), true)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The writer takes the log up after its answers: stopped, it is done.
	a := h.a
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if a.checkpoints.Load() != 0 {
		t.Fatal("a fenced authority took up its log")
	}
	db, err := bolt.Open(h.path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		if tx.ID() != txid {
			return fmt.Errorf("the journal moved from transaction %d to %d while fenced", txid, tx.ID())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
