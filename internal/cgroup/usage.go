package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/marshal-dev/marshal/internal/rawfile"
)

// Usage is what a scope has consumed and holds now.
type Usage struct {
	// CPU is the CPU time used so far.
	CPU time.Duration `json:"cpu"`
	// MemoryBytes is the memory in use now.
	MemoryBytes int64 `json:"memory_bytes"`
	// Tasks is the number of processes and threads now.
	Tasks int64 `json:"tasks"`
	// OOMKills counts the processes in the scope or below it that the
	// kernel's OOM killer killed: oom_kill in memory.events (cgroup v2)
	// or in memory.oom_control (v1). Above zero, an agent that exited was
	// OOM-killed or lost a child to it. It is zero also where no memory
	// controller holds the scope, as no kill can be seen there.
	OOMKills int64 `json:"oom_kills,omitempty"`
}

// ReadUsage reads what the group at rel (relative to each mount in m)
// uses, wherever the host keeps it, so that every backend reads usage the
// same way:
//
//   - CPU time from cgroup2's cpu.stat, there without any controller, or
//     on a host without cgroup2 from v1 cpuacct.usage;
//   - memory from memory.current (v2) or memory.usage_in_bytes (v1), zero
//     when the group is in neither;
//   - tasks from pids.current (v2, then v1), else by counting the threads
//     of every cgroup2 group at rel and below;
//   - OOM kills from memory.events (v2) or memory.oom_control (v1).
//
// It returns an error wrapping ErrNotFound when the group does not exist
// (in cgroup2, or in cpuacct without cgroup2).
func ReadUsage(m Mounts, rel string) (Usage, error) {
	v2 := ""
	if m.V2 != "" {
		v2 = filepath.Join(m.V2, rel)
	}
	v1 := func(ctrl string) string {
		if mnt := m.V1[ctrl]; mnt != "" {
			return filepath.Join(mnt, rel)
		}
		return ""
	}
	var u Usage
	if v2 != "" {
		st, err := ReadCPUStat(v2)
		if err != nil {
			return Usage{}, err
		}
		u.CPU = st.Usage
	} else if dir := v1(v1CPUAccounting); dir != "" {
		ns, err := ReadInt(dir, FileCPUAcctUsage)
		if err != nil {
			return Usage{}, err
		}
		u.CPU = time.Duration(ns)
	}
	memory, pids := v1(Controller(Memory)), v1(Controller(PIDs))
	var (
		found bool
		err   error
	)
	if u.MemoryBytes, _, err = firstInt(file{v2, FileMemoryCurrent}, file{memory, FileMemoryUsage}); err != nil {
		return Usage{}, err
	}
	if u.Tasks, found, err = firstInt(file{v2, FilePIDsCurrent}, file{pids, FilePIDsCurrent}); err != nil {
		return Usage{}, err
	}
	if !found && v2 != "" {
		if u.Tasks, err = CountThreads(v2); err != nil {
			return Usage{}, err
		}
	}
	if u.OOMKills, err = firstKey("oom_kill", file{v2, FileMemoryEvents}, file{memory, FileMemoryOOMCtl}); err != nil {
		return Usage{}, err
	}
	return u, nil
}

// v1CPUAccounting is the v1 controller that counts CPU time.
const v1CPUAccounting = "cpuacct"

// file is one interface file of one group; dir is "" where the group is
// not kept.
type file struct{ dir, name string }

// firstInt reads the first of files that exists; found is false, and
// the value 0, when none does.
func firstInt(files ...file) (v int64, found bool, err error) {
	for _, f := range files {
		if f.dir == "" {
			continue
		}
		v, err := ReadInt(f.dir, f.name)
		if !errors.Is(err, ErrNotFound) {
			return v, true, err
		}
	}
	return 0, false, nil
}

// firstKey reads key from the first of files, flat keyed, that exists,
// and 0 when none does or the one that does lacks key.
func firstKey(key string, files ...file) (int64, error) {
	for _, f := range files {
		if f.dir == "" {
			continue
		}
		data, err := rawfile.Read(filepath.Join(f.dir, f.name))
		if errors.Is(notFound(err), ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		var v int64
		if err := parseFlatKeyed(data, func(k string, n int64) {
			if k == key {
				v = n
			}
		}); err != nil {
			return 0, fmt.Errorf("parsing %s: %w", filepath.Join(f.dir, f.name), err)
		}
		return v, nil
	}
	return 0, nil
}
