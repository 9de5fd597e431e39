package cgroupfs

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// The kernel, not marshal, must hold each limit: these tests make a
// process run into it.

func TestScopePIDsLimitStopsAForkLoop(t *testing.T) {
	b, _ := newBackend(t)
	m := requireMethod(t, b.mounts, cgroup.PIDs)
	const limit = 10
	// Counts the forks that succeed; dash exits at the first that fails.
	sh := startChild(t, nil, "sh", "-c", `read x; i=0; while :; do sleep 60 >/dev/null & i=$((i+1)); echo $i; done`)
	s, applied, err := b.CreateScope(t.Context(), "forker", scope.NewID(), sh.PID(), cgroup.Limits{Tasks: limit})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Limits.Tasks != limit || applied.Enforced[cgroup.PIDs].Method != m {
		t.Fatalf("applied %+v, want tasks %d through %s", applied, limit, m)
	}
	if got := procCgroupOf(t, sh.PID()).v1["pids"]; m == cgroup.MethodCgroupV1 && got != s.Path {
		t.Fatalf("pid %d is in pids group %q, want %q", sh.PID(), got, s.Path)
	}
	sh.Say(t, "go")
	lines := sh.Fields(t)
	if err := sh.Wait(t); err == nil {
		t.Error("fork loop ended without error")
	}
	// The shell is one of the limit's tasks, so limit-1 forks succeed and
	// the next one fails.
	if len(lines) != limit-1 || lines[len(lines)-1] != strconv.Itoa(limit-1) {
		t.Errorf("fork loop counted %v successful forks, want 1..%d", lines, limit-1)
	}
	u, err := b.Usage(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if u.Tasks != limit-1 {
		t.Errorf("Usage.Tasks = %d, want %d (the sleeps left)", u.Tasks, limit-1)
	}
	if err := b.Kill(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}

func TestScopeMemoryLimitOOMKills(t *testing.T) {
	b, _ := newBackend(t)
	m := requireMethod(t, b.mounts, cgroup.Memory)
	const limit = 64 << 20
	alloc := startChild(t, []string{helperEnv + "=alloc"}, os.Args[0])
	s, applied, err := b.CreateScope(t.Context(), "hungry", scope.NewID(), alloc.PID(), cgroup.Limits{MemoryBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Limits.MemoryBytes != limit || applied.Enforced[cgroup.Memory].Method != m {
		t.Fatalf("applied %+v, want memory %d through %s", applied, limit, m)
	}
	alloc.Say(t, "go")
	if err := alloc.Wait(t); !testutil.KilledBy(err, syscall.SIGKILL) {
		t.Fatalf("allocating 1 GiB under a %d byte limit ended with %v, want SIGKILL", limit, err)
	}
	dir := b.limitDir(cgroup.Memory, s.Path)
	if m == cgroup.MethodCgroupV1 {
		if n := readInt(t, filepath.Join(dir, cgroup.FileMemoryFailcnt)); n == 0 {
			t.Errorf("%s = 0, want the limit hit", cgroup.FileMemoryFailcnt)
		}
		if n := readKeyed(t, filepath.Join(dir, cgroup.FileMemoryOOMCtl), "oom_kill"); n < 1 {
			t.Errorf("%s oom_kill = %d, want at least 1", cgroup.FileMemoryOOMCtl, n)
		}
	} else if n := readKeyed(t, filepath.Join(dir, cgroup.FileMemoryEvents), "oom_kill"); n < 1 {
		t.Errorf("%s oom_kill = %d, want at least 1", cgroup.FileMemoryEvents, n)
	}
	if u, err := b.Usage(t.Context(), s); err != nil || u.OOMKills < 1 {
		t.Errorf("Usage = %+v, %v; want at least one OOM kill", u, err)
	}
}

func TestScopeCPUQuotaReadsBackExactly(t *testing.T) {
	b, _ := newBackend(t)
	m := requireMethod(t, b.mounts, cgroup.CPU)
	sleeper := startChild(t, nil, "sleep", "60")
	want := cgroup.Limits{CPUMilli: 250}
	s, applied, err := b.CreateScope(t.Context(), "thinker", scope.NewID(), sleeper.PID(), want)
	if err != nil {
		t.Fatal(err)
	}
	checkApplied(t, b, applied, want)
	checkFiles(t, b, s.Path, want)
	back, err := b.ScopeLimits(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	checkApplied(t, b, back, want)
	if got := procCgroupOf(t, sleeper.PID()).v1["cpu"]; m == cgroup.MethodCgroupV1 && got != s.Path {
		t.Errorf("pid %d is in cpu group %q, want %q", sleeper.PID(), got, s.Path)
	}
}
