package reconcile_test

import (
	"slices"
	"testing"

	"github.com/marshal-dev/marshal/reconcile"
)

func TestIndex(t *testing.T) {
	ix := reconcile.NewIndex()
	ix.Set(wkey("b"), pkey("p"))
	ix.Set(wkey("a"), pkey("p"), pkey("q"))
	ix.Set(wkey("c"), pkey("q"))
	tests := []struct {
		name   string
		change func()
		target reconcile.Key
		want   []reconcile.Key
	}{
		{name: "sorted_referrers", target: pkey("p"), want: []reconcile.Key{wkey("a"), wkey("b")}},
		{name: "several_targets", target: pkey("q"), want: []reconcile.Key{wkey("a"), wkey("c")}},
		{name: "unknown_target", target: pkey("none"), want: []reconcile.Key{}},
		{name: "set_replaces", change: func() { ix.Set(wkey("a"), pkey("q")) },
			target: pkey("p"), want: []reconcile.Key{wkey("b")}},
		{name: "set_nothing_forgets", change: func() { ix.Set(wkey("b")) },
			target: pkey("p"), want: []reconcile.Key{}},
		{name: "delete_forgets", change: func() { ix.Delete(wkey("c")) },
			target: pkey("q"), want: []reconcile.Key{wkey("a")}},
		{name: "duplicate_targets_count_once", change: func() { ix.Set(wkey("d"), pkey("q"), pkey("q")) },
			target: pkey("q"), want: []reconcile.Key{wkey("a"), wkey("d")}},
		{name: "delete_after_duplicates", change: func() { ix.Delete(wkey("d")) },
			target: pkey("q"), want: []reconcile.Key{wkey("a")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.change != nil {
				tc.change()
			}
			if got := ix.Referrers(tc.target); !slices.Equal(got, tc.want) {
				t.Errorf("Referrers(%v) = %v, want %v", tc.target, got, tc.want)
			}
		})
	}
	if got, want := ix.Targets(wkey("a")), []reconcile.Key{pkey("q")}; !slices.Equal(got, want) {
		t.Errorf("Targets(a) = %v, want %v", got, want)
	}
}
