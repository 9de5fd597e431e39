package systemd

import (
	"errors"
	"fmt"
	"os"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

// readApplied reads the limits in force on the group at rel (relative to
// each mount) from the kernel: for each resource the cgroup2 file when
// the group has it (its controller is enabled there), else the file in
// that controller's v1 hierarchy when the group exists there. A limit in
// neither place is not in force, whatever systemd was told.
func (b *Backend) readApplied(rel string) (cgroup.Applied, error) {
	a := cgroup.Applied{Enforced: map[cgroup.Resource]cgroup.Enforcement{}}
	for _, r := range cgroup.AllResources {
		for _, src := range []struct {
			dir    string
			method cgroup.Method
		}{
			{b.v2(rel), cgroup.MethodCgroupV2},
			{b.v1(cgroup.Controller(r), rel), cgroup.MethodCgroupV1},
		} {
			if src.dir == "" {
				continue
			}
			v, err := cgroup.ReadLimit(src.dir, r, src.method)
			if errors.Is(err, cgroup.ErrNotFound) {
				continue
			}
			if err != nil {
				return cgroup.Applied{}, fmt.Errorf("reading back the %s limit of %s: %w", r, rel, err)
			}
			if v == 0 {
				continue
			}
			a.Record(r, v, cgroup.KernelEnforcement(r, src.method))
			break
		}
	}
	return a, nil
}

// groupExists reports whether the group at rel exists: in cgroup2 when the
// host has it, else in the name=systemd hierarchy where systemd tracks
// its units on a legacy host. It returns false, nil when the host has
// neither to look at.
func (b *Backend) groupExists(rel string) (bool, error) {
	dir := b.v2(rel)
	if dir == "" {
		dir = b.v1("name=systemd", rel)
	}
	if dir == "" {
		return false, nil
	}
	_, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// populated reads whether a process is in the group at rel or below it,
// from cgroup2's cgroup.events. known is false when the host has no
// cgroup2 mount to read; a missing group is an error wrapping
// cgroup.ErrNotFound.
func (b *Backend) populated(rel string) (populated, known bool, err error) {
	dir := b.v2(rel)
	if dir == "" {
		return false, false, nil
	}
	ev, err := cgroup.ReadEvents(dir)
	if err != nil {
		return false, true, err
	}
	return ev.Populated, true, nil
}
