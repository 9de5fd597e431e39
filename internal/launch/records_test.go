package launch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/state"
)

// A record reads back as written; one the daemon died before writing
// (empty), or that does not decode, is skipped; a deleted one is gone.
func TestFileStoreKeepsRecords(t *testing.T) {
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := FileStore{Dir: filepath.Join(dir, "launches"), DB: db}
	rec := Record{
		ID: scope.NewID(), Workspace: "web", Profile: "coder", PID: 42, UID: 1000, StartTime: 7, BootID: "b",
		Started: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	rec.Attempt = rec.ID
	if err := s.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{scope.NewID() + ".json": "", scope.NewID() + ".json": `{"id": "`} {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.List(t.Context())
	if err != nil || len(recs) != 1 || recs[0] != rec {
		t.Fatalf("List = %+v, %v; want the record put alone", recs, err)
	}
	if err := s.Delete(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), rec.ID); err != nil {
		t.Errorf("deleting a missing record: %v", err)
	}
	if recs, err := s.List(t.Context()); err != nil || len(recs) != 0 {
		t.Errorf("List after Delete = %+v, %v; want none", recs, err)
	}
}
