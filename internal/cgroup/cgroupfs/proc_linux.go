package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/rawfile"
)

// procCgroup is where a process is, as /proc/<pid>/cgroup says: its
// cgroup2 path and, per v1 controller, its path in that hierarchy; each
// relative to its mount.
type procCgroup struct {
	v2 string
	v1 map[string]string
}

// v1Dir returns the absolute path of the process's group in the v1
// hierarchy of ctrl, or "" when unknown.
func (p procCgroup) v1Dir(mounts map[string]string, ctrl string) string {
	rel, ok := p.v1[ctrl]
	if !ok || mounts[ctrl] == "" {
		return ""
	}
	return filepath.Join(mounts[ctrl], rel)
}

// readProcCgroup reads /proc/<pid>/cgroup. A process that is gone is an
// error wrapping cgroup.ErrNoProcess.
func readProcCgroup(pid int) (procCgroup, error) {
	b, err := rawfile.Read("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return procCgroup{}, fmt.Errorf("pid %d: %w", pid, cgroup.ErrNoProcess)
	}
	if err != nil {
		return procCgroup{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return parseProcCgroup(string(b)), nil
}

// parseProcCgroup parses lines of the form "hierarchy-ID:controllers:path".
func parseProcCgroup(s string) procCgroup {
	p := procCgroup{v1: map[string]string{}}
	for _, line := range strings.Split(s, "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			p.v2 = path
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c != "" {
				p.v1[c] = path
			}
		}
	}
	return p
}
