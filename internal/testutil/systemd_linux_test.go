package testutil

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

func startUserManager(t *testing.T) *UserManager {
	t.Helper()
	m, err := StartUserManager()
	if errors.Is(err, ErrNoUserManager) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUserManagerLeavesNothingBehind(t *testing.T) {
	m := startUserManager(t)
	stopped := false
	defer func() {
		if !stopped {
			m.Stop()
		}
	}()

	// Running: the manager answers on its bus, in its own groups and its
	// own mount namespace.
	if v := managerVersion(t, m.BusAddress); v == "" {
		t.Fatalf("manager on %s reports no Version", m.BusAddress)
	}
	if got := cgroup2Of(t, m.PID); !strings.HasPrefix(got, m.Cgroup+"/") {
		t.Fatalf("manager %d is in cgroup %q, want below %q", m.PID, got, m.Cgroup)
	}
	tmpfs := "marshal-test-manager:" + m.RuntimeDir
	if !hasMountSource(t, m.PID, tmpfs) {
		t.Fatalf("manager %d has no tmpfs %q on /run/systemd", m.PID, tmpfs)
	}
	if hasMountSource(t, os.Getpid(), tmpfs) {
		t.Fatalf("tmpfs %q leaked into the test's mount namespace", tmpfs)
	}
	for _, dir := range m.CgroupDirs {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("manager's cgroup: %v", err)
		}
	}

	// Every process of the manager's tree, held by a pidfd so that a
	// reused pid cannot pass for a survivor.
	pids := pidsBelow(t, m.CgroupDirs[0])
	if len(pids) < 2 {
		t.Fatalf("manager's tree holds pids %v, want the manager and its bus daemon", pids)
	}
	pidfds := map[int]int{}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd of %d: %v", pid, err)
		}
		defer unix.Close(fd)
		pidfds[pid] = fd
	}

	stopped = true
	if err := m.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	if err := m.Stop(); err != nil {
		t.Fatalf("second Stop() = %v, want nil", err)
	}

	for pid, fd := range pidfds {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err != nil || n != 1 {
			t.Errorf("process %d of the manager's tree still runs after Stop", pid)
		}
	}
	for _, dir := range m.CgroupDirs {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s after Stop: stat error %v, want not exist", dir, err)
		}
	}
	for _, dir := range []string{m.RuntimeDir, filepath.Dir(m.RuntimeDir)} {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Stop: stat error %v, want not exist", dir, err)
		}
	}
	if hasMountSource(t, os.Getpid(), tmpfs) {
		t.Errorf("tmpfs %q mounted in the test's namespace after Stop", tmpfs)
	}
}

func TestUserManagersAreIndependent(t *testing.T) {
	a := startUserManager(t)
	defer a.Stop()
	b := startUserManager(t)
	defer b.Stop()
	if a.RuntimeDir == b.RuntimeDir || a.Cgroup == b.Cgroup || a.BusAddress == b.BusAddress {
		t.Fatalf("two managers share names: %+v and %+v", a, b)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if v := managerVersion(t, b.BusAddress); v == "" {
		t.Fatalf("second manager stopped answering after the first was stopped")
	}
}

func managerVersion(t *testing.T, address string) string {
	t.Helper()
	conn, err := dbus.Connect(address, dbus.WithAuth(dbus.AuthExternal(strconv.Itoa(os.Getuid()))), dbus.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("connecting to %s: %v", address, err)
	}
	defer conn.Close()
	v, err := conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").GetProperty("org.freedesktop.systemd1.Manager.Version")
	if err != nil {
		t.Fatalf("manager Version on %s: %v", address, err)
	}
	s, _ := v.Value().(string)
	return s
}

func cgroup2Of(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("process %d has no cgroup2 line in %q", pid, data)
	return ""
}

func hasMountSource(t *testing.T, pid int, source string) bool {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, after, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		// fstype source options
		if fields := strings.Fields(after); len(fields) >= 2 && fields[1] == source {
			return true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return false
}

func pidsBelow(t *testing.T, root string) []int {
	t.Helper()
	var pids []int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return err
			}
			pids = append(pids, pid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pids
}
