package cgrouptest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// The model keeps cgroup v2's rules, the ones that decide whether a limit
// file exists and may be written.
func TestKernelKeepsCgroupV2Rules(t *testing.T) {
	k := NewKernel(t, LayoutV2)
	root := k.Mounts().V2
	a, b := filepath.Join(root, "a"), filepath.Join(root, "a", "b")
	for _, dir := range []string{a, b} {
		if err := k.Mkdir(dir); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := cgroup.ReadFile(a, cgroup.FileControllers); got != "cpuset cpu io memory hugetlb pids" {
		t.Errorf("a's %s = %q, want the root's subtree_control", cgroup.FileControllers, got)
	}
	if got, _ := cgroup.ReadFile(b, cgroup.FileControllers); got != "" {
		t.Errorf("b's %s = %q, want none: a enables nothing", cgroup.FileControllers, got)
	}
	if _, err := cgroup.ReadFile(b, cgroup.FileMemoryMax); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("reading b's memory.max = %v, want not found", err)
	}
	if _, err := cgroup.EnableControllers(k, a, "memory", "pids"); err != nil {
		t.Fatal(err)
	}
	if got, _ := cgroup.ReadFile(b, cgroup.FileControllers); got != "memory pids" {
		t.Errorf("b's %s = %q, want memory pids", cgroup.FileControllers, got)
	}
	if got, _, err := cgroup.SetLimit(k, b, cgroup.Memory, cgroup.MethodCgroupV2, 64<<20+1); err != nil || got != 64<<20 {
		t.Errorf("SetLimit memory = %d, %v; want 64 MiB, rounded down to a page", got, err)
	}
	if _, err := cgroup.EnableControllers(k, b, "cpu"); !errors.Is(err, cgroup.ErrUnavailable) {
		t.Errorf("enabling cpu in b, which a does not give = %v, want ErrUnavailable", err)
	}
	if err := k.WriteFile(a, cgroup.FileSubtreeControl, "+cpu"); err != nil {
		t.Fatal(err)
	}
	if err := k.WriteFile(b, cgroup.FileCPUMax, "999 100000"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a quota below 1 ms = %v, want EINVAL", err)
	}

	child := testutil.StartChild(t, exec.Command("sleep", "600"))
	if err := cgroup.MoveProcess(k, a, child.PID()); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("moving a process into a, which enables controllers = %v, want EBUSY", err)
	}
	if err := cgroup.MoveProcess(k, b, child.PID()); err != nil {
		t.Fatal(err)
	}
	if ev, err := cgroup.ReadEvents(a); err != nil || !ev.Populated {
		t.Errorf("a's events = %+v, %v; want populated", ev, err)
	}
	if _, err := cgroup.EnableControllers(k, b, "memory"); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("enabling memory in b, which holds a process = %v, want EBUSY", err)
	}
	if err := cgroup.RemoveGroup(k, b); !errors.Is(err, cgroup.ErrBusy) {
		t.Errorf("removing b with a process = %v, want ErrBusy", err)
	}
	if err := cgroup.KillGroup(k, a); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(t); !testutil.KilledBy(err, syscall.SIGKILL) {
		t.Errorf("child ended with %v, want SIGKILL", err)
	}
	ctx := t.Context()
	if _, err := cgroup.WaitEvents(ctx, b, func(ev cgroup.GroupEvents) bool { return !ev.Populated }); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{b, a} {
		if err := cgroup.RemoveGroup(k, dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := cgroup.MoveProcess(k, root, 1<<22+1); !errors.Is(err, cgroup.ErrNoProcess) {
		t.Errorf("moving no process = %v, want ErrNoProcess", err)
	}
}

// On the hybrid layout the limits are in v1 hierarchies and the cgroup2
// tree has no controller to give.
func TestKernelHybridLayout(t *testing.T) {
	k := NewKernel(t, LayoutHybrid)
	m := k.Mounts()
	if m.V2 == "" || m.V1["memory"] == "" || m.V1["cpu"] != m.V1["cpuacct"] {
		t.Fatalf("mounts = %+v, want cgroup2 and v1 cpu,cpuacct, memory, pids", m)
	}
	g := filepath.Join(m.V2, "g")
	if err := k.Mkdir(g); err != nil {
		t.Fatal(err)
	}
	if _, err := cgroup.EnableControllers(k, m.V2, "memory"); !errors.Is(err, cgroup.ErrUnavailable) {
		t.Errorf("enabling memory in the unified root = %v, want ErrUnavailable", err)
	}
	v1 := filepath.Join(m.V1["memory"], "g")
	if err := k.Mkdir(v1); err != nil {
		t.Fatal(err)
	}
	if got, _, err := cgroup.SetLimit(k, v1, cgroup.Memory, cgroup.MethodCgroupV1, 64<<20); err != nil || got != 64<<20 {
		t.Errorf("SetLimit v1 memory = %d, %v; want 64 MiB", got, err)
	}
}
