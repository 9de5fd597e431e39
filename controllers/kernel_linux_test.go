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
	// Layout is the modelled host's layout; empty on the host's own tree
	// and the fake backend.
	Layout cgrouptest.Layout
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

// ModelKernel is cgroupfs on a model of the kernel's cgroups in layout
// l (cgrouptest.Kernel), as anyone. It skips t for a layout cgroupfs
// cannot work on.
func ModelKernel(t testing.TB, l cgrouptest.Layout) Kernel {
	t.Helper()
	k := cgrouptest.NewKernel(t, l)
	b, err := cgroupfs.New(cgroupfs.Options{Root: "/marshal", Mounts: k.Mounts(), FS: k})
	if err != nil {
		t.Skipf("cgroupfs on a %s host: %v", l, err)
	}
	return Kernel{
		Name: b.Name(), Layout: l, Backend: b, Mounts: k.Mounts(), Root: "/marshal",
		Mkdir: func(rel string) error {
			_, err := cgroup.MkdirAll(k, filepath.Join(k.Mounts().V2, rel))
			return err
		},
	}
}

// OnEachKernel runs test as a subtest on the host's cgroup tree (skipped
// without root), on cgroupfs over a model of each host layout (pure
// cgroup v2, hybrid; cgroupfs refuses a v1-only host), and on the fake
// backend.
func OnEachKernel(t *testing.T, test func(t *testing.T, k Kernel)) {
	t.Run("cgroupfs", func(t *testing.T) { test(t, HostKernel(t)) })
	for _, l := range []cgrouptest.Layout{cgrouptest.LayoutV2, cgrouptest.LayoutHybrid} {
		t.Run("model-"+string(l), func(t *testing.T) { test(t, ModelKernel(t, l)) })
	}
	t.Run("fake", func(t *testing.T) { test(t, FakeKernel(t)) })
}

// V2 returns the absolute cgroup2 path of the group at rel below Root.
func (k Kernel) V2(rel ...string) string {
	return filepath.Join(append([]string{k.Mounts.V2, k.Root}, rel...)...)
}
