package systemd

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
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
			switch r {
			case cgroup.CPU:
				a.Limits.CPUMilli = v
			case cgroup.Memory:
				a.Limits.MemoryBytes = v
			case cgroup.PIDs:
				a.Limits.Tasks = v
			}
			a.Enforced[r] = cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: src.method, Controller: cgroup.LimitFile(r, src.method)}
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

// readUsage reads what the group at rel uses: CPU time from cgroup2's
// cpu.stat (there without any controller) or v1 cpuacct.usage; memory
// from memory.current (v2) or memory.usage_in_bytes (v1), zero when the
// group is in neither; tasks from pids.current (v2 or v1), else by
// counting the threads of every group below rel in cgroup2.
func (b *Backend) readUsage(rel string) (cgroup.Usage, error) {
	var u cgroup.Usage
	if dir := b.v2(rel); dir != "" {
		st, err := cgroup.ReadCPUStat(dir)
		if err != nil {
			return cgroup.Usage{}, err
		}
		u.CPU = st.Usage
	} else if dir := b.v1("cpuacct", rel); dir != "" {
		ns, err := cgroup.ReadInt(dir, "cpuacct.usage")
		if err != nil && !errors.Is(err, cgroup.ErrNotFound) {
			return cgroup.Usage{}, err
		}
		u.CPU = time.Duration(ns)
	}
	var err error
	u.MemoryBytes, err = firstInt(
		[2]string{b.v2(rel), cgroup.FileMemoryCurrent},
		[2]string{b.v1(cgroup.Controller(cgroup.Memory), rel), cgroup.FileMemoryUsage},
	)
	if err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		return cgroup.Usage{}, err
	}
	u.Tasks, err = firstInt(
		[2]string{b.v2(rel), cgroup.FilePIDsCurrent},
		[2]string{b.v1(cgroup.Controller(cgroup.PIDs), rel), cgroup.FilePIDsCurrent},
	)
	if errors.Is(err, cgroup.ErrNotFound) && b.v2(rel) != "" {
		u.Tasks, err = cgroup.CountThreads(b.v2(rel))
	}
	if err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		return cgroup.Usage{}, err
	}
	return u, nil
}

// firstInt reads the first of the (group, file) pairs that exists. It
// returns 0 and an error wrapping cgroup.ErrNotFound when none does.
func firstInt(files ...[2]string) (int64, error) {
	for _, f := range files {
		if f[0] == "" {
			continue
		}
		v, err := cgroup.ReadInt(f[0], f[1])
		if !errors.Is(err, cgroup.ErrNotFound) {
			return v, err
		}
	}
	return 0, cgroup.ErrNotFound
}
