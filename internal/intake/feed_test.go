package intake

import (
	"path/filepath"
	"testing"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// unitOf loads content as the unit name.
func unitOf(name, content string) *Unit {
	lf := loader.LoadBytes(name, []byte(content))
	return &Unit{Objects: lf.Objects, Errors: lf.Errors}
}

func TestFeedRestoresOnlyItsUnitsAndKeepsLastGood(t *testing.T) {
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	origin := Origin{Key: reconcile.Key{Kind: "Test", Name: "api"}, Name: "the test API"}

	first := NewFeed(FeedOptions{Origin: origin, Sink: newRecorder(), Store: db, Bucket: state.LastGood, Prefix: "profile/"})
	first.Declare(map[string]*Unit{"profile/a": unitOf("profile/a", profile("a", 1))}, true)
	first.lastGood.write()
	// A unit of another prefix, as another feed on the same bucket keeps.
	if err := db.Write(state.LastGood, map[string][]byte{"workspace/w": encodeGood(unitOf("workspace/w", profile("w", 1)).Objects)}); err != nil {
		t.Fatal(err)
	}

	sink := newRecorder()
	second := NewFeed(FeedOptions{Origin: origin, Sink: sink, Store: db, Bucket: state.LastGood, Prefix: "profile/"})
	if _, err := second.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := sink.names(); got != "[Profile/a]" {
		t.Fatalf("restored %q, want only Profile/a", got)
	}
	second.Declare(map[string]*Unit{"profile/a": unitOf("profile/a", broken("a"))}, true)
	d := sink.get("Profile", "a")
	if d == nil || len(d.Invalid) == 0 || cpuOf(d) != 1 {
		t.Fatalf("after a bad version: %+v, want the last good one, invalid", d)
	}
	if st := second.Status(); st.Objects != 1 || len(st.Errors) != 1 || st.Held {
		t.Fatalf("status %+v, want 1 object, 1 error, not held", st)
	}
}
