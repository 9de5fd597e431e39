package controllers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgroupfs"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// Kernel is a cgroup tree that the package's tests run the controllers
// on: the host's, through cgroupfs on a private subtree (as root), or the
// fake of cgrouptest (as anyone). It is exported for the external tests.
type Kernel struct {
	// Name is the backend's name: "cgroupfs" or "fake".
	Name string
	// Backend is the backend on the tree, unwrapped.
	Backend cgroup.Backend
	// Mounts are where the tree's hierarchies are mounted; every
	// Scope.Path is relative to Mounts.V2.
	Mounts cgroup.Mounts
	// Root is the group that holds marshal.slice, relative to each mount.
	Root string
	// Mkdir makes the empty group rel, relative to Mounts.V2, as a launch
	// does before it moves its process in.
	Mkdir func(rel string) error
}

// HostKernel is cgroupfs on a private subtree of the host's cgroup tree,
// removed when t ends. It skips t unless it runs as root.
func HostKernel(t testing.TB) Kernel {
	t.Helper()
	tree := testutil.NewCgroupTree(t)
	b, err := cgroupfs.New(cgroupfs.Options{Root: tree.Rel, Mounts: tree.Mounts})
	if err != nil {
		t.Fatalf("cgroupfs.New: %v", err)
	}
	return Kernel{
		Name: b.Name(), Backend: b, Mounts: tree.Mounts, Root: tree.Rel,
		Mkdir: func(rel string) error { return os.MkdirAll(filepath.Join(tree.Mounts.V2, rel), 0o755) },
	}
}

// FakeKernel is a fake cgroup tree, as cgrouptest models it.
func FakeKernel(t testing.TB) Kernel {
	t.Helper()
	f := cgrouptest.New(t, cgrouptest.Options{})
	return Kernel{Name: f.Name(), Backend: f, Mounts: cgroup.Mounts{V2: f.Mount()}, Root: "/", Mkdir: f.Mkdir}
}

// OnEachKernel runs test as a subtest on the host's cgroup tree (skipped
// without root) and on the fake one.
func OnEachKernel(t *testing.T, test func(t *testing.T, k Kernel)) {
	t.Run("cgroupfs", func(t *testing.T) { test(t, HostKernel(t)) })
	t.Run("fake", func(t *testing.T) { test(t, FakeKernel(t)) })
}

// V2 returns the absolute cgroup2 path of the group at rel below Root.
func (k Kernel) V2(rel ...string) string {
	return filepath.Join(append([]string{k.Mounts.V2, k.Root}, rel...)...)
}
