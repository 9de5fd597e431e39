package apiserver

import (
	"slices"
	"testing"
)

func TestChangeLog(t *testing.T) {
	l := NewChangeLog()
	_, last, next, _ := l.Since(0)
	if last != 0 {
		t.Fatalf("Since(0) of an empty log: last %d, want 0", last)
	}
	l.Note("b")
	l.Note("a")
	l.Note("b")
	select {
	case <-next:
	default:
		t.Fatal("the channel of Since(0) is open after a change")
	}
	tests := []struct {
		name  string
		after uint64
		names []string
		known bool
	}{
		{"from_the_start", 0, []string{"a", "b"}, true},
		{"after_the_first", 1, []string{"a", "b"}, true},
		{"after_the_second", 2, []string{"b"}, true},
		{"after_the_latest", 3, nil, true},
		{"from_the_future", 4, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names, last, _, known := l.Since(tc.after)
			if !slices.Equal(names, tc.names) || last != 3 || known != tc.known {
				t.Errorf("Since(%d) = %q, %d, %v; want %q, 3, %v", tc.after, names, last, known, tc.names, tc.known)
			}
		})
	}
	t.Run("too_far_behind", func(t *testing.T) {
		for range 2 * changeLogKeep {
			l.Note("c")
		}
		if _, _, _, known := l.Since(1); known {
			t.Error("Since(1) is known after more changes than are kept")
		}
		names, _, _, known := l.Since(3 + 2*changeLogKeep - 1)
		if !known || !slices.Equal(names, []string{"c"}) {
			t.Errorf("Since(the one before the latest) = %q, %v; want [c], true", names, known)
		}
	})
}
