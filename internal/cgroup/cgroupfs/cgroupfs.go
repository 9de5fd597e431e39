package cgroupfs

import (
	"fmt"
	"path"
	"sync"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// DefaultRoot is the group that holds marshal.slice when Options.Root is
// empty, relative to the cgroup2 mount.
const DefaultRoot = "/marshal"

// Options configure a Backend.
type Options struct {
	// Root is the group that holds marshal.slice, relative to the cgroup2
	// mount and, on a hybrid host, to each cgroup v1 mount: a clean
	// absolute path such as "/marshal". Empty means DefaultRoot; "/" puts
	// marshal.slice at the top, where systemd would.
	Root string
	// Mounts is where the cgroup hierarchies are mounted. The zero value
	// means cgroup.ReadMounts().
	Mounts cgroup.Mounts
	// FS makes, removes and writes the groups. Nil means cgroup.Host,
	// whose cgroup2 mount New checks first; another FS (a model of the
	// kernel in tests) is taken as it is.
	FS cgroup.FS
}

// Backend is the cgroupfs implementation of cgroup.Backend. Create it
// with New; its methods are safe for concurrent use.
type Backend struct {
	fs     cgroup.FS
	mounts cgroup.Mounts
	root   string // Options.Root, cleaned
	tree   string // root/marshal.slice, relative to each mount
	// methods says how each resource is limited on this host: cgroup_v2,
	// cgroup_v1, or absent when no hierarchy has its controller.
	methods map[cgroup.Resource]cgroup.Method

	// mu orders slice removal against creating groups inside slices:
	// RemoveSlice holds it for writing, EnsureSlice and CreateScope for
	// reading.
	mu sync.RWMutex
}

var _ cgroup.Backend = (*Backend)(nil)

// Name returns "cgroupfs".
func (b *Backend) Name() string { return "cgroupfs" }

// cleanRoot returns Options.Root defaulted and checked.
func cleanRoot(root string) (string, error) {
	if root == "" {
		return DefaultRoot, nil
	}
	if !path.IsAbs(root) || path.Clean(root) != root {
		return "", fmt.Errorf("cgroupfs: root %q: want a clean absolute path such as %q", root, DefaultRoot)
	}
	return root, nil
}

// sliceRel returns the path of profile's slice relative to each mount.
func (b *Backend) sliceRel(profile string) string {
	return path.Join(b.tree, scope.SliceName(profile))
}

// scopeRel returns the path of a scope relative to each mount.
func (b *Backend) scopeRel(profile, id string) string {
	return path.Join(b.tree, scope.SliceName(profile), scope.ScopeName(profile, id))
}
