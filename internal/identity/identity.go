package identity

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/marshal-dev/marshal/internal/scope"
)

// Hierarchy names the cgroup hierarchy a process's scope was found in.
type Hierarchy string

const (
	// Unified is the cgroup2 hierarchy, the "0::" line of
	// /proc/<pid>/cgroup.
	Unified Hierarchy = "cgroup2"
	// NameSystemd is systemd's named cgroup v1 hierarchy on a hybrid or
	// legacy host, the "name=systemd" line of /proc/<pid>/cgroup.
	NameSystemd Hierarchy = "name=systemd"
)

// Identity is the marshal identity of one process: the launch whose scope
// holds it. Its JSON form is flat: profile, id, scope, path, pid,
// hierarchy, and deleted when set.
type Identity struct {
	scope.Identity
	// PID is the process the identity was resolved for.
	PID int `json:"pid"`
	// Hierarchy is the hierarchy whose path named the scope. Path is
	// relative to that hierarchy's root as seen from this cgroup
	// namespace.
	Hierarchy Hierarchy `json:"hierarchy"`
	// Deleted reports that the process's cgroup2 group has been removed:
	// the process has exited and waits for its parent to reap it.
	Deleted bool `json:"deleted,omitempty"`
}

// deletedSuffix is what the kernel appends to a cgroup2 path whose group
// has been removed while a process still refers to it.
const deletedSuffix = " (deleted)"

// parseProcCgroup returns the identity named by the contents of a
// /proc/<pid>/cgroup file. The cgroup2 line is preferred: it is where the
// cgroupfs backend places scopes and where systemd mirrors its own, so it
// is the one both backends agree on. The name=systemd line counts only
// when the cgroup2 line names no scope.
func parseProcCgroup(data []byte) (Identity, error) {
	var unified, systemd []byte
	var haveUnified, haveSystemd bool
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		// hierarchy-ID:controller-list:path; the path may hold colons.
		hier, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		controllers, path, ok := bytes.Cut(rest, []byte{':'})
		if !ok {
			continue
		}
		switch {
		case string(hier) == "0" && len(controllers) == 0:
			unified, haveUnified = path, true
		case hasController(controllers, "name=systemd"):
			systemd, haveSystemd = path, true
		}
	}

	var seen []string
	if haveUnified {
		path, deleted := bytes.CutSuffix(unified, []byte(deletedSuffix))
		if id, ok := scope.Parse(string(path)); ok {
			return Identity{Identity: id, Hierarchy: Unified, Deleted: deleted}, nil
		}
		seen = append(seen, fmt.Sprintf("%s %q", Unified, unified))
	}
	if haveSystemd {
		if id, ok := scope.Parse(string(systemd)); ok {
			return Identity{Identity: id, Hierarchy: NameSystemd}, nil
		}
		seen = append(seen, fmt.Sprintf("%s %q", NameSystemd, systemd))
	}
	if len(seen) == 0 {
		return Identity{}, fmt.Errorf("no %s or %s line: %w", Unified, NameSystemd, ErrNotManaged)
	}
	return Identity{}, fmt.Errorf("cgroup %s: %w", strings.Join(seen, ", "), ErrNotManaged)
}

// hasController reports whether the comma-separated list holds name.
func hasController(list []byte, name string) bool {
	for len(list) > 0 {
		item := list
		if i := bytes.IndexByte(list, ','); i >= 0 {
			item, list = list[:i], list[i+1:]
		} else {
			list = nil
		}
		if string(item) == name {
			return true
		}
	}
	return false
}
