package launch

import (
	"slices"
	"testing"
)

// A rollback undoes, last made first, what was made since the last
// commit, and only for a refusal.
func TestRollbackUnwindsLastFirst(t *testing.T) {
	tests := []struct {
		name    string
		refused bool
		commit  bool // commit after the first two steps
		want    []string
	}{
		{"refused", true, false, []string{"caller", "attempt", "slot"}},
		{"refused_after_commit", true, true, []string{"caller"}},
		{"launched", false, false, nil},
		{"launched_after_commit", false, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var undone []string
			step := func(name string) func(*Refusal) {
				return func(r *Refusal) {
					undone = append(undone, name)
					r.State = State(name)
				}
			}
			var ref *Refusal
			if tc.refused {
				ref = &Refusal{}
			}
			var rb rollback
			rb.push(step("slot"))
			rb.push(step("attempt"))
			if tc.commit {
				rb.commit()
			}
			rb.push(step("caller"))
			rb.unwind(&ref)
			rb.unwind(&ref) // a second unwind has nothing left to undo
			if !slices.Equal(undone, tc.want) {
				t.Errorf("undone %q, want %q", undone, tc.want)
			}
			if tc.refused && ref.State != State(undone[len(undone)-1]) {
				t.Errorf("state %q, want the last step's", ref.State)
			}
		})
	}
}
