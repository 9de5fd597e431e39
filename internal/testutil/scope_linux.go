package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/marshal-dev/marshal/internal/scope"
)

// NewScope creates marshal.slice/marshal-<profile>.slice/<scope> in the
// tree's cgroup2 part and returns the identity a process in it has.
func (c *CgroupTree) NewScope(t testing.TB, profile string) scope.Identity {
	t.Helper()
	id := scope.NewID()
	name := scope.ScopeName(profile, id)
	rel := filepath.Join(c.Rel, scope.RootSlice, scope.SliceName(profile), name)
	if err := os.MkdirAll(filepath.Join(c.Mounts.V2, rel), 0o755); err != nil {
		t.Fatal(err)
	}
	return scope.Identity{Profile: profile, ID: id, Scope: name, Path: rel}
}

// MovePID writes pid to the cgroup.procs of the group dir, made first
// when missing.
func MovePID(t testing.TB, dir string, pid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("moving pid %d into %s: %v", pid, dir, err)
	}
}

// IsolateSystemdHierarchy moves pid into the tree's own group of the
// name=systemd hierarchy, where one is mounted, so that the hierarchy
// the test process happens to run in cannot name a scope for it.
func (c *CgroupTree) IsolateSystemdHierarchy(t testing.TB, pid int) {
	t.Helper()
	if mnt := c.Mounts.V1["name=systemd"]; mnt != "" {
		MovePID(t, filepath.Join(mnt, c.Rel), pid)
	}
}
