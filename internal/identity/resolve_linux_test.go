package identity

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// start starts cmd and kills and reaps it when t ends.
func start(t testing.TB, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func startSleep(t testing.TB, c *testutil.CgroupTree) int {
	t.Helper()
	pid := start(t, exec.Command("sleep", "60")).Process.Pid
	c.IsolateSystemdHierarchy(t, pid)
	return pid
}

func TestResolveProcessInScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	want := c.NewScope(t, "coder")
	pid := startSleep(t, c)
	testutil.MovePID(t, filepath.Join(c.Mounts.V2, want.Path), pid)

	got, err := Resolve(pid)
	if err != nil {
		t.Fatalf("Resolve(%d) error: %v", pid, err)
	}
	if wantID := (Identity{Identity: want, PID: pid, Hierarchy: Unified}); got != wantID {
		t.Errorf("Resolve(%d) = %+v, want %+v", pid, got, wantID)
	}
}

func TestResolveGrandchildInScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	want := c.NewScope(t, "my-agent")
	// The shell forks its sleep only after it is in the scope: it waits for
	// a line on stdin, then prints the sleep's pid.
	sh := exec.Command("sh", "-c", `read go; sleep 60 & echo $!; wait`)
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start(t, sh)
	c.IsolateSystemdHierarchy(t, sh.Process.Pid)
	testutil.MovePID(t, filepath.Join(c.Mounts.V2, want.Path), sh.Process.Pid)
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the grandchild's pid: %v", err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}

	for _, pid := range []int{sh.Process.Pid, grandchild} {
		got, err := Resolve(pid)
		if wantID := (Identity{Identity: want, PID: pid, Hierarchy: Unified}); err != nil || got != wantID {
			t.Errorf("Resolve(%d) = %+v, %v, want %+v", pid, got, err, wantID)
		}
	}
}

func TestResolveProcessInSubGroupOfScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	want := c.NewScope(t, "coder")
	pid := startSleep(t, c)
	// A group the agent made inside its scope, two levels down.
	testutil.MovePID(t, filepath.Join(c.Mounts.V2, want.Path, "build", "step-1"), pid)

	got, err := Resolve(pid)
	if wantID := (Identity{Identity: want, PID: pid, Hierarchy: Unified}); err != nil || got != wantID {
		t.Errorf("Resolve(%d) = %+v, %v, want %+v", pid, got, err, wantID)
	}
}

func TestResolveNameSystemdHierarchy(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	mnt := c.Mounts.V1["name=systemd"]
	if mnt == "" {
		t.Skip("needs a name=systemd hierarchy (hybrid or legacy host)")
	}
	want := c.NewScope(t, "coder")
	pid := startSleep(t, c)
	// In the scope in systemd's v1 hierarchy only; in cgroup2 it stays in
	// the tree's root, which names no scope.
	testutil.MovePID(t, filepath.Join(mnt, want.Path, "sub"), pid)
	testutil.MovePID(t, c.V2(), pid)

	got, err := Resolve(pid)
	if wantID := (Identity{Identity: want, PID: pid, Hierarchy: NameSystemd}); err != nil || got != wantID {
		t.Errorf("Resolve(%d) = %+v, %v, want %+v", pid, got, err, wantID)
	}
}

func TestResolveProcessOutsideScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	sc := c.NewScope(t, "coder")
	tests := []struct {
		name  string
		group string // relative to the cgroup2 mount
	}{
		{name: "tree_root", group: c.Rel},
		{name: "root_slice", group: filepath.Join(c.Rel, scope.RootSlice)},
		{name: "profile_slice", group: filepath.Dir(sc.Path)},
		{name: "sibling_of_scope", group: filepath.Join(filepath.Dir(sc.Path), "marshal-coder-"+strings.ToUpper(sc.ID)+".scope")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pid := startSleep(t, c)
			testutil.MovePID(t, filepath.Join(c.Mounts.V2, tc.group), pid)
			got, err := Resolve(pid)
			if !errors.Is(err, ErrNotManaged) || errors.Is(err, ErrNoProcess) {
				t.Errorf("Resolve(%d) in %s = %+v, %v, want ErrNotManaged", pid, tc.group, got, err)
			}
		})
	}
}

func TestResolveNoProcess(t *testing.T) {
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pid  int
	}{
		{name: "reaped", pid: exited.Process.Pid},
		{name: "zero", pid: 0},
		{name: "negative", pid: -1},
		{name: "above_pid_max", pid: 1 << 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.pid)
			if !errors.Is(err, ErrNoProcess) || errors.Is(err, ErrNotManaged) {
				t.Errorf("Resolve(%d) = %+v, %v, want ErrNoProcess", tc.pid, got, err)
			}
		})
	}
}

func TestResolveExitedProcessInRemovedScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	want := c.NewScope(t, "coder")
	dir := filepath.Join(c.Mounts.V2, want.Path)
	cmd := exec.Command("sleep", "60")
	start(t, cmd)
	pid := cmd.Process.Pid
	c.IsolateSystemdHierarchy(t, pid)
	testutil.MovePID(t, dir, pid)

	// Killed and not reaped: a zombie, still referring to its scope. The
	// kernel counts the scope unpopulated before it reports the exit, so
	// once waitid (WNOWAIT, which leaves the zombie) returns, the scope
	// can be removed.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}

	got, err := Resolve(pid)
	if wantID := (Identity{Identity: want, PID: pid, Hierarchy: Unified, Deleted: true}); err != nil || got != wantID {
		t.Errorf("Resolve(%d) = %+v, %v, want %+v", pid, got, err, wantID)
	}
	cmd.Wait()
	if got, err := Resolve(pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Resolve(%d) after reaping = %+v, %v, want ErrNoProcess", pid, got, err)
	}
}

func TestReadProcCgroupGrowsBuffer(t *testing.T) {
	want, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	// Start with room for one byte, so every read fills the buffer.
	got, err := readProcCgroup(os.Getpid(), make([]byte, 0, 1))
	if err != nil || string(got) != string(want) {
		t.Errorf("readProcCgroup(self) = %q, %v, want %q", got, err, want)
	}
}

func BenchmarkResolve(b *testing.B) {
	b.Run("managed", func(b *testing.B) {
		c := testutil.NewCgroupTree(b)
		sc := c.NewScope(b, "coder")
		pid := startSleep(b, c)
		testutil.MovePID(b, filepath.Join(c.Mounts.V2, sc.Path, "sub"), pid)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Resolve(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("not_managed", func(b *testing.B) {
		pid := os.Getpid()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Resolve(pid); !errors.Is(err, ErrNotManaged) {
				b.Fatal(err)
			}
		}
	})
}
