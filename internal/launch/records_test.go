package launch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/state"
)

// newRecordStore returns a store in a fresh directory, and the directory.
func newRecordStore(t *testing.T) (*FileStore, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	launches := filepath.Join(dir, "launches")
	s := NewFileStore(launches, db)
	t.Cleanup(func() { s.Close() })
	return s, launches
}

func testRecord() Record {
	r := Record{
		ID: scope.NewID(), Workspace: "web", Profile: "coder", PID: 42, UID: 1000, StartTime: 7, BootID: "b",
		Started: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	r.Attempt = r.ID
	return r
}

// listAfresh lists the records as the next run of the daemon would, with
// a store of its own.
func listAfresh(t *testing.T, s *FileStore) []Record {
	t.Helper()
	again := NewFileStore(s.dir, s.db)
	defer again.Close()
	recs, err := again.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// A record reads back as written, by this run and the next; a deleted
// one is gone; deleting a missing one is no error.
func TestFileStoreKeepsRecords(t *testing.T) {
	s, _ := newRecordStore(t)
	a, b := testRecord(), testRecord()
	for _, r := range []Record{a, b} {
		if err := s.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), a.ID); err != nil {
		t.Errorf("deleting a missing record: %v", err)
	}
	recs, err := s.List(t.Context())
	if err != nil || len(recs) != 1 || recs[0] != b {
		t.Fatalf("List = %+v, %v; want b alone", recs, err)
	}
	if recs := listAfresh(t, s); len(recs) != 1 || recs[0] != b {
		t.Fatalf("the next run lists %+v; want b alone", recs)
	}
}

// A line the daemon died in the midst of writing is skipped, and cut
// off: the record put after it is a line of its own, and kept.
func TestFileStoreSkipsALineCutShort(t *testing.T) {
	s, dir := newRecordStore(t)
	a := testRecord()
	if err := s.Put(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, logName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"put":{"id":"` + scope.NewID()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := testRecord()
	if err := s.Put(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	recs := listAfresh(t, s)
	if len(recs) != 2 || !hasRecord(recs, a) || !hasRecord(recs, b) {
		t.Fatalf("listed %+v; want a and b, without the line cut short", recs)
	}
}

func hasRecord(recs []Record, r Record) bool {
	for _, x := range recs {
		if x == r {
			return true
		}
	}
	return false
}

// The records an earlier version kept a file each are listed, and moved
// into the log; a file it died before writing (empty), or that does not
// decode, is removed.
func TestFileStoreAdoptsRecordFiles(t *testing.T) {
	s, dir := newRecordStore(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := testRecord()
	data := `{"id":"` + old.ID + `","workspace":"web","profile":"coder","attempt":"` + old.ID +
		`","pid":42,"uid":1000,"start_time":7,"boot_id":"b","started":"2026-05-01T12:00:00Z"}`
	for name, content := range map[string]string{
		old.ID + ".json": data, scope.NewID() + ".json": "", scope.NewID() + ".json": `{"id": "`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.List(t.Context())
	if err != nil || len(recs) != 1 || recs[0] != old {
		t.Fatalf("List = %+v, %v; want the earlier version's record alone", recs, err)
	}
	left, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(left) != 0 {
		t.Errorf("record files left: %v, %v; want every one moved or removed", left, err)
	}
	if recs := listAfresh(t, s); len(recs) != 1 || recs[0] != old {
		t.Fatalf("the next run lists %+v; want the adopted record", recs)
	}
	if err := s.Delete(t.Context(), old.ID); err != nil {
		t.Fatal(err)
	}
	if recs := listAfresh(t, s); len(recs) != 0 {
		t.Errorf("after Delete the next run lists %+v; want none", recs)
	}
}

// The log's size follows the records kept, not the launches made: it is
// rewritten once deleted records' lines outweigh the kept ones'.
func TestFileStoreLogStaysSmall(t *testing.T) {
	s, dir := newRecordStore(t)
	kept := testRecord()
	if err := s.Put(t.Context(), kept); err != nil {
		t.Fatal(err)
	}
	for range 2000 {
		r := testRecord()
		if err := s.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(t.Context(), r.ID); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 2*compactAbove {
		t.Errorf("after 2000 launches the log holds %d bytes, want at most %d", fi.Size(), 2*compactAbove)
	}
	if recs := listAfresh(t, s); len(recs) != 1 || recs[0] != kept {
		t.Fatalf("after the rewrites the next run lists %+v; want the record kept", recs)
	}
}

// BenchmarkFileStorePutDelete is a launch's record written before its
// scope exists and deleted once the scope is gone.
func BenchmarkFileStorePutDelete(b *testing.B) {
	dir := b.TempDir()
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s := NewFileStore(filepath.Join(dir, "launches"), db)
	defer s.Close()
	r := testRecord()
	for b.Loop() {
		r.ID = scope.NewID()
		if err := s.Put(b.Context(), r); err != nil {
			b.Fatal(err)
		}
		if err := s.Delete(b.Context(), r.ID); err != nil {
			b.Fatal(err)
		}
	}
}
