package cgroup_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// Priming a move into a real group moves nothing into it; a group that is
// not there is ErrNotFound.
func TestPrimeMove(t *testing.T) {
	tree := testutil.NewCgroupTree(t)
	dir := filepath.Join(tree.V2(), "g")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := cgroup.ReadProcs(tree.V2())
	if err != nil {
		t.Fatal(err)
	}
	if err := cgroup.PrimeMove(dir); err != nil {
		t.Fatalf("PrimeMove = %v", err)
	}
	if procs, err := cgroup.ReadProcs(dir); err != nil || len(procs) != 0 {
		t.Errorf("the primed group holds %v (%v), want nothing", procs, err)
	}
	if after, err := cgroup.ReadProcs(tree.V2()); err != nil || !slices.Equal(after, before) {
		t.Errorf("its parent holds %v (%v), want %v as before", after, err, before)
	}
	if err := cgroup.PrimeMove(filepath.Join(tree.V2(), "gone")); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("PrimeMove of a missing group = %v, want ErrNotFound", err)
	}
}
