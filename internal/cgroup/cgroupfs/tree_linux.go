package cgroupfs

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

// errNoDelegation is wrapped by the error of a slice whose scopes cannot
// get a cgroup v2 controller: it is not delegated to Root, or a group on
// the way holds processes. The slice itself may still hold limits.
var errNoDelegation = errors.New("cgroup v2 controller not delegated")

// v2Controllers returns the cgroup v2 controllers that hold one of
// marshal's limits here, in the order of cgroup.AllResources; none on a
// hybrid host whose controllers are all in v1 hierarchies.
func (b *Backend) v2Controllers() []string {
	var ctrls []string
	for _, r := range cgroup.AllResources {
		if b.methods[r] == cgroup.MethodCgroupV2 {
			ctrls = append(ctrls, cgroup.Controller(r))
		}
	}
	return ctrls
}

// ensureSlice makes slice rel (Root/marshal.slice/<slice>) exist with the
// v2 controllers its scopes need enabled for them: in the
// cgroup.subtree_control of Root, of marshal.slice and of the slice,
// which are marshal's own groups. Root's parent is not: what it delegates
// to Root (Root's cgroup.controllers) is what marshal can have. A slice
// that has them all already costs one read.
//
// cgroup v2 lets no group that holds processes enable a controller for
// the groups below it (the no-internal-process rule; the mount root is
// exempt). marshal never puts a process in Root, marshal.slice or a
// slice, and moves none out of one that holds some: the error, wrapping
// errNoDelegation, names the group, and the scopes below it run without
// kernel limits on those controllers, which Probe reports.
func (b *Backend) ensureSlice(rel string) error {
	ctrls := b.v2Controllers()
	if len(ctrls) > 0 && b.enabled(rel, ctrls) {
		return nil
	}
	if _, err := cgroup.MkdirAll(b.fs, b.v2(rel)); err != nil {
		return err
	}
	if len(ctrls) == 0 {
		return nil
	}
	return b.enableDown([]string{b.root, b.tree, rel}, ctrls)
}

// enabled reports whether every one of ctrls is enabled in group rel's
// cgroup.subtree_control; the kernel allows that only when every group
// above it enables them too.
func (b *Backend) enabled(rel string, ctrls []string) bool {
	s, err := cgroup.ReadFile(b.v2(rel), cgroup.FileSubtreeControl)
	if err != nil {
		return false
	}
	have := strings.Fields(s)
	for _, c := range ctrls {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// enableDown enables ctrls in the cgroup.subtree_control of each of the
// groups rels, parents first, each of which exists. A controller Root is
// not given, or a group that holds processes, is an error wrapping
// errNoDelegation that says which; what could be enabled is.
func (b *Backend) enableDown(rels []string, ctrls []string) error {
	var errs []error
	for _, rel := range rels {
		dir := b.v2(rel)
		avail, err := cgroup.ReadFile(dir, cgroup.FileControllers)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		var missing []string
		for _, c := range ctrls {
			if !slices.Contains(strings.Fields(avail), c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, notDelegated(rel, missing))
			ctrls = slices.DeleteFunc(slices.Clone(ctrls), func(c string) bool { return slices.Contains(missing, c) })
		}
		if len(ctrls) == 0 {
			break
		}
		_, err = cgroup.EnableControllers(b.fs, dir, ctrls...)
		if errors.Is(err, syscall.EBUSY) {
			errs = append(errs, fmt.Errorf("%s holds processes, and cgroup v2 lets no group that holds processes enable %s for the groups below it: %w: %w",
				dir, strings.Join(ctrls, ", "), errNoDelegation, err))
			break
		}
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}

// notDelegated says that group rel was not given ctrls by its parent.
func notDelegated(rel string, ctrls []string) error {
	return fmt.Errorf("the cgroup v2 controllers %s are not enabled for %s: its parent %s does not have them in %s: %w",
		strings.Join(ctrls, ", "), rel, path.Dir(rel), cgroup.FileSubtreeControl, errNoDelegation)
}
