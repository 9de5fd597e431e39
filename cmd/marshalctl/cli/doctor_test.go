package cli

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// hybridMountinfo is /proc/self/mountinfo of a hybrid host: cgroup2 at
// /sys/fs/cgroup/unified, cpu, memory and pids in v1.
const hybridMountinfo = `25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct
29 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
30 25 0:28 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids
`

// unifiedMountinfo is that of a unified host.
const unifiedMountinfo = `25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
`

// fakeHost points doctor's local checks at a tree made for the test:
// mountinfo, this process's cgroup, the controllers of groupDir (below
// the cgroup2 mount) and, when manager is set, a listening systemd
// manager socket at the mode's path. It returns the tree's root.
func fakeHost(t *testing.T, euid int, mountinfo, cgroupLine, groupDir, controllers string, manager bool) string {
	t.Helper()
	root, err := os.MkdirTemp("", "mdoc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	write := func(p, data string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/mountinfo", mountinfo)
	write("proc/self/cgroup", cgroupLine+"\n")
	write(filepath.Join(groupDir, "cgroup.controllers"), controllers+"\n")
	env := map[string]string{"HOME": filepath.Join(root, "home/dev"), "XDG_RUNTIME_DIR": "/run/user/1000"}
	if manager {
		// A manager runs where systemd booted the host (sd_booted).
		os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755)
		socket := filepath.Join(root, "run/systemd/private")
		if euid != 0 {
			socket = filepath.Join(root, env["XDG_RUNTIME_DIR"], "systemd/private")
		}
		os.MkdirAll(filepath.Dir(socket), 0o755)
		ln, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	prev := localHost
	localHost = hostView{root: root, euid: euid, getenv: func(k string) string { return env[k] }}
	t.Cleanup(func() { localHost = prev })
	return root
}

// hybridRoot is fakeHost for root on a hybrid host without systemd.
func hybridRoot(t *testing.T) {
	fakeHost(t, 0, hybridMountinfo, "0::/", "sys/fs/cgroup/unified", "hugetlb", false)
}
