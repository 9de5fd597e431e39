package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode"

	bolt "go.etcd.io/bbolt"
)

func openJournal(t *testing.T, path string) (*Authority, error) {
	t.Helper()
	a, err := Open(path, Options{Inspector: newFakeInspector()})
	if err == nil {
		t.Cleanup(func() { a.Close() })
	}
	return a, err
}

// DevGuard: storage_is_exclusive_without_inventing_a_boot_clock.
func TestCreateThenOpenIsExclusiveAndCreateNeverTouchesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admission.db")
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("journal mode = %v, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after Create, want the journal alone", len(entries))
	}
	first, err := Open(path, Options{Inspector: newFakeInspector()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{Inspector: newFakeInspector(), LockTimeout: 1})
	if !errors.Is(err, ErrJournalInUse) {
		t.Fatalf("second Open = %v, want %v", err, ErrJournalInUse)
	}
	if err := Create(path); !errors.Is(err, ErrJournalExists) {
		t.Fatalf("Create over an open journal = %v, want %v", err, ErrJournalExists)
	}
	first.Close()
	if _, err := openJournal(t, path); err != nil {
		t.Fatalf("Open after the first closed = %v", err)
	}
}

// The lock is the kernel's: a journal held by another process is in use.
func TestJournalHeldByAnotherProcessIsInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admission.db")
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	child := startCrashChild(t, path, "hold")
	defer child.kill()
	child.waitLine(t, "holding")
	_, err := Open(path, Options{Inspector: newFakeInspector(), LockTimeout: 1})
	if !errors.Is(err, ErrJournalInUse) {
		t.Fatalf("Open while another process holds the journal = %v, want %v", err, ErrJournalInUse)
	}
	child.kill()
	if _, err := openJournal(t, path); err != nil {
		t.Fatalf("Open once the holder was killed = %v", err)
	}
}

// DevGuard: storage_open_does_not_initialize_or_repair_journals,
// missing_corrupt_or_existing_journal_is_never_silently_initialized,
// storage_bootstrap_rejects_a_fifo_lock_without_creating_a_journal.
func TestOpenNeverCreatesOrRepairs(t *testing.T) {
	valid := filepath.Join(t.TempDir(), "valid.db")
	if err := Create(valid); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(t.TempDir(), "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err })
	db.Close()
	foreignBytes, _ := os.ReadFile(foreign)
	validBytes, _ := os.ReadFile(valid)
	truncated := validBytes[:len(validBytes)/2]
	garbled := bytes.Clone(validBytes)
	for i := 0; i < 2*os.Getpagesize() && i < len(garbled); i++ {
		garbled[i] ^= 0xff
	}
	tests := []struct {
		name  string
		setup func(path string)
		want  error
	}{
		{"missing", func(string) {}, ErrJournalMissing},
		{"empty", func(p string) { os.WriteFile(p, nil, 0o600) }, ErrJournalCorrupt},
		{"not_a_database", func(p string) { os.WriteFile(p, []byte("corrupt journal evidence"), 0o600) }, ErrJournalCorrupt},
		{"truncated", func(p string) { os.WriteFile(p, truncated, 0o600) }, ErrJournalCorrupt},
		{"meta_pages_garbled", func(p string) { os.WriteFile(p, garbled, 0o600) }, ErrJournalCorrupt},
		{"foreign_bbolt", func(p string) { os.WriteFile(p, foreignBytes, 0o600) }, ErrJournalForeign},
		{"symlink", func(p string) { os.Symlink(valid, p) }, ErrJournalForeign},
		{"fifo", func(p string) { syscall.Mkfifo(p, 0o600) }, ErrJournalForeign},
		{"directory", func(p string) { os.Mkdir(p, 0o700) }, ErrJournalForeign},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "admission.db")
			tc.setup(path)
			before := readRegular(path)
			_, err := openJournal(t, path)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if tc.name == "missing" {
				if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("Open created the missing journal: %v", err)
				}
				return
			}
			if after := readRegular(path); !bytes.Equal(before, after) {
				t.Fatal("Open changed the file it refused")
			}
		})
	}
	if got, _ := os.ReadFile(valid); !bytes.Equal(got, validBytes) {
		t.Fatal("the symlink's target was changed")
	}
}

// readRegular returns the bytes of a regular file and nil for anything
// else: reading a FIFO would block.
func readRegular(path string) []byte {
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	data, _ := os.ReadFile(path)
	return data
}

// DevGuard: storage_rejects_unknown_schema_without_changing_it. Schema 1
// keyed attempts by ID; a later build's schema is unknown too.
func TestOpenRefusesAnUnknownSchemaAndLeavesIt(t *testing.T) {
	for _, schema := range []string{"1", "5"} {
		t.Run("schema_"+schema, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "admission.db")
			if err := Create(path); err != nil {
				t.Fatal(err)
			}
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte(schema)) })
			_, err := openJournal(t, path)
			var se *SchemaError
			if !errors.As(err, &se) || se.Found != schema || se.Want != SchemaVersion || !errors.Is(err, ErrJournalSchema) {
				t.Fatalf("Open = %v, want a SchemaError found %s", err, schema)
			}
			rewrite(t, path, func(tx *bolt.Tx) error {
				if got := string(tx.Bucket(bucketMeta).Get(keySchema)); got != schema {
					t.Errorf("schema after the refused Open = %q, want %s", got, schema)
				}
				return nil
			})
		})
	}
}

// rewrite changes a closed journal directly, as damage would.
func rewrite(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// DevGuard: storage_activation_revalidates_accounting_in_the_recovery_transaction,
// recovery_rejects_accounting_inconsistent_records,
// accounting_index_corruption_cannot_hide_a_live_reservation_at_restart.
func TestOpenRefusesAnInconsistentJournal(t *testing.T) {
	// at calls fn with the journal key of attempt id.
	at := func(id string, fn func(b *bolt.Bucket, k []byte) error) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			_, keys, err := storedRecords(tx)
			if err != nil {
				return err
			}
			return fn(tx.Bucket(bucketAttempts), keys[id])
		}
	}
	mutate := func(id string, fn func(r *Record)) func(tx *bolt.Tx) error {
		return at(id, func(b *bolt.Bucket, k []byte) error {
			var r Record
			if err := json.Unmarshal(b.Get(k), &r); err != nil {
				return err
			}
			fn(&r)
			data, _ := json.Marshal(r)
			return b.Put(k, data)
		})
	}
	tests := []struct {
		name   string
		damage func(tx *bolt.Tx) error
	}{
		{"charged_attempt_removed", at(key(1), func(b *bolt.Bucket, k []byte) error { return b.Delete(k) })},
		{"totals_changed", func(tx *bolt.Tx) error {
			data, _ := json.Marshal(totals{Charged: Budget{1, 1, 1}, Count: 2})
			return tx.Bucket(bucketMeta).Put(keyTotals, data)
		}},
		{"reservation_removed", mutate(key(1), func(r *Record) { r.Reservation = nil })},
		{"reservation_shrunk", mutate(key(1), func(r *Record) { r.Reservation.Quantities.CPUMilli = 1 })},
		{"charge_hidden_behind_the_totals", mutate(key(1), func(r *Record) { r.Phase = PhaseCancelled })},
		{"released_attempt_charged_again", mutate(key(2), func(r *Record) { r.Phase, r.Release = PhaseSuspect, "" })},
		{"unknown_phase", mutate(key(1), func(r *Record) { r.Phase = "running" })},
		{"released_without_reason", mutate(key(2), func(r *Record) { r.Release = "" })},
		{"no_helper_created_with_a_scope", mutate(key(2), func(r *Record) { r.Scope = r.scopeName() })},
		{"attempt_recorded_twice", at(key(2), func(b *bolt.Bucket, k []byte) error {
			return b.Put(attemptKey(1000), b.Get(k))
		})},
		{"key_not_a_sequence", at(key(2), func(b *bolt.Bucket, k []byte) error {
			if err := b.Delete(k); err != nil {
				return err
			}
			return b.Put([]byte(key(2)), b.Get(k))
		})},
		{"undecodable_record", at(key(1), func(b *bolt.Bucket, k []byte) error { return b.Put(k, []byte("{")) })},
		{"permit_for_a_prepared_attempt", at(key(1), func(b *bolt.Bucket, k []byte) error {
			var raw map[string]any
			if err := json.Unmarshal(b.Get(k), &raw); err != nil {
				return err
			}
			raw["permit_sha256"] = meaning
			data, _ := json.Marshal(raw)
			return b.Put(k, data)
		})},
		{"id_with_a_corrupt_byte", at(key(1), func(b *bolt.Bucket, k []byte) error {
			data := bytes.Replace(b.Get(k), []byte(key(1)), append([]byte{0xff}, key(1)[1:]...), 1)
			return b.Put(k, data)
		})},
		{"owner_without_process", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketOwners).Put([]byte("runner"), []byte(`{"name":"runner","generation":1}`))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p := h.ready()
			h.prepare(p, key(1))
			h.prepare(p, key(2))
			h.begin(p, key(2))
			if _, err := h.a.AbandonLaunch(t.Context(), p, key(2), AbandonSpawnFailed); err != nil {
				t.Fatal(err)
			}
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			rewrite(t, h.path, tc.damage)
			before, _ := os.ReadFile(h.path)
			_, err := openJournal(t, h.path)
			if !errors.Is(err, ErrJournalInconsistent) {
				t.Fatalf("Open = %v, want %v", err, ErrJournalInconsistent)
			}
			// What the journal holds is shown escaped, never as raw bytes.
			if msg := err.Error(); strings.ContainsFunc(msg, func(r rune) bool { return r > unicode.MaxASCII }) {
				t.Fatalf("Open = %q, which shows bytes of the journal unescaped", msg)
			}
			if after, _ := os.ReadFile(h.path); !bytes.Equal(before, after) {
				t.Fatal("Open changed the journal it refused")
			}
			// Leave a consistent journal for the harness's final check.
			os.Remove(h.path)
			Create(h.path)
		})
	}
}

// Open's recovery writes only when it changes something.
func TestOpenOfACleanJournalWritesNothing(t *testing.T) {
	h := newHarness(t)
	p := h.ready()
	h.prepare(p, key(1))
	h.admit(p, key(2))
	h.stop()
	before, _ := os.ReadFile(h.path)
	h.open()
	h.stop()
	if after, _ := os.ReadFile(h.path); !bytes.Equal(before, after) {
		t.Fatal("reopening a journal with nothing to recover changed it")
	}
	h.open()
}

// marshalctl admin backup: a consistent copy, taken while the authority
// serves, that opens like the original; an existing file is never
// overwritten.
func TestBackupIsAConsistentCopyThatOpens(t *testing.T) {
	h := newHarness(t)
	h.capacity = capacityOf(Budget{CPUMilli: 64000, MemoryBytes: 64 * gib, Tasks: 4096})
	h.restart()
	p := h.ready()
	h.prepare(p, key(1))
	h.bound(p, key(2))
	h.admit(p, key(3))
	want := allRecords(t, h)
	dst := filepath.Join(t.TempDir(), "backup.db")
	if err := h.a.BackupFile(t.Context(), dst); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dst)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("backup mode = %v, want 0600", st.Mode().Perm())
	}
	if err := h.a.BackupFile(t.Context(), dst); !errors.Is(err, os.ErrExist) {
		t.Fatalf("BackupFile over an existing file = %v, want %v", err, os.ErrExist)
	}
	h.prepare(p, key(4)) // the copy is as of the backup, not after
	copyAuth, err := Open(dst, Options{Inspector: h.insp, Clock: h.clock})
	if err != nil {
		t.Fatalf("Open of the backup = %v", err)
	}
	defer copyAuth.Close()
	got := imageRecords(t, copyAuth)
	if len(got) != len(want) {
		t.Fatalf("backup holds %d attempts, want %d", len(got), len(want))
	}
	for k, r := range want {
		g := got[k]
		if r.Phase.Charged() && r.Phase != PhasePrepared {
			r.Phase = PhaseSuspect // the backup opened as a restart
		}
		if !sameRecord(g, r) {
			t.Errorf("backup %s = %+v, want %+v", k, g, r)
		}
	}
	if s := copyAuth.Snapshot(); s.Committed != job.Requested.Add(job.Requested).Add(job.Requested) {
		t.Errorf("backup committed = %+v, want three reservations", s.Committed)
	}
}
