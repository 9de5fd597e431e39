package admission

import (
	"bytes"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The writer reads charged attempts from the ledger rather than decoding
// them from the journal; Charged answers from it too. Both must be what
// the journal holds, byte for byte once encoded, whatever callers do to
// the records they were answered with, and again after a restart.
func TestChargedRecordsAreTheJournals(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	prepared := h.prepare(p, key(1))
	bound, permit := h.bound(p, key(2))
	run, err := h.a.AuthorizeRun(t.Context(), p, key(2), permit)
	if err != nil || !run.MayExec {
		t.Fatalf("AuthorizeRun = %+v, %v", run, err)
	}

	// What callers were answered with is theirs to change.
	for _, r := range []*Record{&prepared, &bound, &run.Record} {
		r.Reservation.Quantities.CPUMilli++
		if r.Plan != nil {
			r.Plan.CPU.Level = "changed"
		}
		if r.Root != nil {
			r.Root.PID++
		}
		if r.Applied != nil {
			clear(r.Applied.Enforced)
		}
	}
	charged, err := h.a.Charged(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range charged {
		charged[i].Reservation.Quantities.MemoryBytes++ // nor may this reach the ledger
	}
	checkLedger(t, h, 2)
	// The next transaction on an attempt starts from the journal's record.
	again, err := h.a.AuthorizeRun(t.Context(), p, key(2), permit)
	if err != nil || again.MayExec {
		t.Fatalf("AuthorizeRun again = %+v, %v; want the record, MayExec false", again, err)
	}
	checkLedger(t, h, 2, again.Record)
	again.Record.Root.PID++
	again.Record.Reservation.Quantities.Tasks++
	checkLedger(t, h, 2)
	h.restart()
	checkLedger(t, h, 2)
}

// checkLedger checks that Charged lists want attempts and that each, the
// ledger's own copy and any of answers about it encode to what the
// journal stores for it.
func checkLedger(t *testing.T, h *harness, want int, answers ...Record) {
	t.Helper()
	charged, err := h.a.Charged(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(charged) != want {
		t.Fatalf("Charged lists %d attempts, want %d", len(charged), want)
	}
	h.a.mu.Lock()
	ledger, seqs := map[string]*Record{}, map[string]uint64{}
	for id, r := range h.a.led.charged {
		ledger[id], seqs[id] = r.clone(), h.a.led.keys[id]
	}
	h.a.mu.Unlock()
	err = h.view(func(tx *bolt.Tx) error {
		attempts := tx.Bucket(bucketAttempts)
		for _, r := range charged {
			stored := attempts.Get(attemptKey(seqs[r.ID]))
			held := map[string]*Record{"Charged": &r, "the ledger": ledger[r.ID]}
			for i := range answers {
				if answers[i].ID == r.ID {
					held["an answer"] = &answers[i]
				}
			}
			for what, rec := range held {
				if rec == nil {
					t.Errorf("%s: %s has no record", r.ID, what)
					continue
				}
				got, err := encodeRecord(rec)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, stored) {
					t.Errorf("%s: %s holds\n%s\nthe journal\n%s", r.ID, what, got, stored)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
