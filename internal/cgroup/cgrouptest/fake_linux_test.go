package cgrouptest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// TestMain checks that a Fake stops every goroutine of its own when its
// test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// eventLog collects the events of a Watch.
type eventLog struct {
	wake chan struct{}

	mu     sync.Mutex // guards events
	events []cgroup.Event
}

func (l *eventLog) add(ev cgroup.Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// of returns "type" or "type(resync)" of each event about scope name.
func (l *eventLog) of(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.events {
		if ev.Scope.Name != name {
			continue
		}
		s := ev.Type.String()
		if ev.Resync {
			s += "(resync)"
		}
		out = append(out, s)
	}
	return out
}

// waitFor waits until the events about name are want.
func (l *eventLog) waitFor(t *testing.T, name string, want ...string) {
	t.Helper()
	testutil.Eventually(t, l.wake, func() bool { return slices.Equal(l.of(name), want) },
		name+" events "+strings.Join(want, ", "))
}

// watch runs f.Watch until the test ends, and checks that it then returns
// context.Canceled. It returns once the watch reports, which it shows by
// reporting a marker scope that it then removes again.
func watch(t *testing.T, f *cgrouptest.Fake) *eventLog {
	t.Helper()
	marker := cgroup.Scope{Name: scope.ScopeName("marker", scope.NewID())}
	if err := f.Mkdir("/marshal.slice/marshal-marker.slice/" + marker.Name); err != nil {
		t.Fatal(err)
	}
	l := &eventLog{wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Watch(ctx, l.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch = %v, want %v", err, context.Canceled)
		}
	})
	l.waitFor(t, marker.Name, "created(resync)")
	if err := f.RemoveScope(t.Context(), marker); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveSlice(t.Context(), "marker"); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, marker.Name, "created(resync)", "removed")
	return l
}

func sleeper(t *testing.T) *testutil.Child {
	return testutil.StartChild(t, exec.Command("sleep", "600"))
}

func readEvents(t *testing.T, f *cgrouptest.Fake, sc cgroup.Scope) cgroup.GroupEvents {
	t.Helper()
	ev, err := cgroup.ReadEvents(filepath.Join(f.Mount(), sc.Path))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// A scope lives as on cgroup2: created populated by the process moved in,
// its files saying so; killed, the process's exit empties it; then it can
// be removed, and its slice after it. Watch reports each step in order.
func TestScopeLifecycle(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	ctx := t.Context()
	log := watch(t, f)
	c := sleeper(t)
	id := scope.NewID()
	sc, applied, err := f.CreateScope(ctx, "coder", id, c.PID(), cgroup.Limits{Tasks: 32})
	if err != nil {
		t.Fatal(err)
	}
	want := cgroup.Scope{Name: scope.ScopeName("coder", id), Profile: "coder", ID: id,
		Path: "/marshal.slice/marshal-coder.slice/" + scope.ScopeName("coder", id), Populated: true}
	if sc != want {
		t.Errorf("CreateScope = %+v, want %+v", sc, want)
	}
	if applied.Limits != (cgroup.Limits{Tasks: 32}) || applied.Enforced[cgroup.PIDs].Method != cgroup.MethodCgroupV2 {
		t.Errorf("applied = %+v, want pids 32 through cgroup_v2", applied)
	}
	dir := filepath.Join(f.Mount(), sc.Path)
	if got, err := cgroup.ReadLimit(dir, cgroup.PIDs, cgroup.MethodCgroupV2); err != nil || got != 32 {
		t.Errorf("pids.max reads %d, %v; want 32", got, err)
	}
	if procs, err := cgroup.ReadProcs(dir); err != nil || !slices.Equal(procs, []int{c.PID()}) {
		t.Errorf("cgroup.procs = %v, %v; want [%d]", procs, err, c.PID())
	}
	if !readEvents(t, f, sc).Populated {
		t.Error("cgroup.events says not populated with a live process in the scope")
	}
	log.waitFor(t, sc.Name, "created", "populated")
	if list, err := f.ListScopes(ctx); err != nil || !slices.Equal(list, []cgroup.Scope{want}) {
		t.Errorf("ListScopes = %+v, %v; want [%+v]", list, err, want)
	}
	if u, err := f.Usage(ctx, sc); err != nil || u.Tasks != 1 {
		t.Errorf("Usage = %+v, %v; want 1 task", u, err)
	}

	if err := f.RemoveScope(ctx, sc); !errors.Is(err, cgroup.ErrBusy) {
		t.Errorf("RemoveScope of a populated scope = %v, want ErrBusy", err)
	}
	if err := f.RemoveSlice(ctx, "coder"); !errors.Is(err, cgroup.ErrBusy) {
		t.Errorf("RemoveSlice with a scope inside = %v, want ErrBusy", err)
	}
	// Only Name locates a scope, as the launch path passes it.
	if err := f.Kill(ctx, cgroup.Scope{Name: sc.Name}); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(t); !testutil.KilledBy(err, syscall.SIGKILL) {
		t.Errorf("child exited with %v, want killed by SIGKILL", err)
	}
	log.waitFor(t, sc.Name, "created", "populated", "emptied")
	if readEvents(t, f, sc).Populated {
		t.Error("cgroup.events says populated after the only process exited")
	}
	if procs, err := cgroup.ReadProcs(dir); err != nil || len(procs) != 0 {
		t.Errorf("cgroup.procs = %v, %v; want none", procs, err)
	}

	if err := f.RemoveScope(ctx, sc); err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, sc.Name, "created", "populated", "emptied", "removed")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scope directory after RemoveScope: %v, want it gone", err)
	}
	if err := f.RemoveSlice(ctx, "coder"); err != nil {
		t.Fatal(err)
	}
	gone := []struct {
		name string
		err  error
	}{
		{"RemoveScope", f.RemoveScope(ctx, sc)},
		{"RemoveSlice", f.RemoveSlice(ctx, "coder")},
		{"Kill", f.Kill(ctx, sc)},
	}
	for _, g := range gone {
		if g.err != nil {
			t.Errorf("%s of what is gone = %v, want nil", g.name, g.err)
		}
	}
	if _, err := f.ScopeLimits(ctx, sc); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("ScopeLimits of a removed scope = %v, want ErrNotFound", err)
	}
	if _, err := f.Usage(ctx, sc); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("Usage of a removed scope = %v, want ErrNotFound", err)
	}
}

// cgroup.WaitEvents, which watches cgroup.events with inotify, sees the
// Fake's changes as it sees the kernel's.
func TestEventsFileChangesAreSeenByInotify(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	c := sleeper(t)
	sc, _, err := f.CreateScope(t.Context(), "coder", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := cgroup.WaitEvents(t.Context(), filepath.Join(f.Mount(), sc.Path),
			func(e cgroup.GroupEvents) bool { return !e.Populated })
		done <- err
	}()
	c.Kill()
	c.Wait(t)
	if err := <-done; err != nil {
		t.Fatalf("WaitEvents = %v", err)
	}
}

// Moving a process into a second scope takes it out of the first, which
// empties; a process that is gone cannot be moved; a scope cannot be
// created twice.
func TestMembership(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	ctx := t.Context()
	log := watch(t, f)
	c := sleeper(t)
	a, _, err := f.CreateScope(ctx, "coder", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := f.CreateScope(ctx, "writer", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, a.Name, "created", "populated", "emptied")
	log.waitFor(t, b.Name, "created", "populated")
	if _, _, err := f.CreateScope(ctx, "writer", b.ID, c.PID(), cgroup.Limits{}); !errors.Is(err, cgroup.ErrExists) {
		t.Errorf("CreateScope of an existing scope = %v, want ErrExists", err)
	}

	dead := testutil.StartChild(t, exec.Command("true"))
	dead.Wait(t)
	if _, _, err := f.CreateScope(ctx, "coder", scope.NewID(), dead.PID(), cgroup.Limits{}); !errors.Is(err, cgroup.ErrNoProcess) {
		t.Errorf("CreateScope of a process that is gone = %v, want ErrNoProcess", err)
	}
	if list, _ := f.ListScopes(ctx); len(list) != 2 {
		t.Errorf("scopes after failed creates = %+v, want the two made before", list)
	}
}

// A Watch begins with every existing scope, marked Resync, then follows
// new ones; Mkdir makes an empty group a launch has not filled yet.
func TestWatchStartsWithWhatExists(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	c := sleeper(t)
	live, _, err := f.CreateScope(t.Context(), "coder", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	empty := scope.ScopeName("coder", scope.NewID())
	if err := f.Mkdir("/marshal.slice/marshal-coder.slice/" + empty); err != nil {
		t.Fatal(err)
	}
	if err := f.Mkdir("/marshal.slice/marshal-coder.slice/" + empty); !errors.Is(err, cgroup.ErrExists) {
		t.Errorf("Mkdir of an existing group = %v, want ErrExists", err)
	}
	log := watch(t, f)
	if got := log.of(live.Name); !slices.Equal(got, []string{"created(resync)", "populated(resync)"}) {
		t.Errorf("events of the live scope = %v, want created and populated, resync", got)
	}
	if got := log.of(empty); !slices.Equal(got, []string{"created(resync)"}) {
		t.Errorf("events of the empty scope = %v, want created, resync", got)
	}

	later := scope.ScopeName("writer", scope.NewID())
	if err := f.Mkdir("/marshal.slice/marshal-writer.slice/" + later); err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, later, "created")
}

// Limits are written only where they differ and read back from the files,
// so that a value written behind the Fake's back shows, and is put back.
func TestSliceLimitsReadBack(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	ctx := t.Context()
	want := cgroup.Limits{CPUMilli: 500, MemoryBytes: 64 << 20, Tasks: 64}
	applied, err := f.EnsureSlice(ctx, "coder", want)
	if err != nil || applied.Limits != want || len(applied.Enforced) != 3 {
		t.Fatalf("EnsureSlice = %+v, %v; want %+v, all enforced", applied, err, want)
	}
	dir := filepath.Join(f.Mount(), "marshal.slice", "marshal-coder.slice")
	files := map[string]string{"cpu.max": "50000 100000", "memory.max": strconv.Itoa(64 << 20), "pids.max": "64"}
	for name, content := range files {
		if got, err := cgroup.ReadFile(dir, name); err != nil || got != content {
			t.Errorf("%s = %q, %v; want %q", name, got, err, content)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	if applied, err = f.EnsureSlice(ctx, "coder", want); err != nil || applied.Limits != want {
		t.Errorf("EnsureSlice after drift = %+v, %v; want %+v", applied, err, want)
	}
	if got, _ := cgroup.ReadFile(dir, "pids.max"); got != "64" {
		t.Errorf("pids.max after EnsureSlice = %q, want 64 put back", got)
	}
	if applied, err = f.EnsureSlice(ctx, "coder", cgroup.Limits{}); err != nil || applied.Limits != (cgroup.Limits{}) {
		t.Errorf("EnsureSlice without limits = %+v, %v; want none in force", applied, err)
	}
	if got, _ := cgroup.ReadFile(dir, "memory.max"); got != "max" {
		t.Errorf("memory.max after removing the limit = %q, want max", got)
	}
	if _, err := f.EnsureSlice(ctx, "Not A Name", want); err == nil {
		t.Error("EnsureSlice of an invalid profile name succeeded")
	}
}

// A resource the host has no controller for is probed below kernel
// level, has no file, and reads back as no limit.
func TestNoController(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{NoController: []cgroup.Resource{cgroup.CPU, cgroup.PIDs}})
	ctx := t.Context()
	caps, err := f.Probe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if caps[cgroup.CPU].Level != v1alpha1.LevelCooperative || caps[cgroup.PIDs].Level != v1alpha1.LevelAccounted ||
		caps[cgroup.Memory] != (cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV2, Controller: "memory.max"}) {
		t.Errorf("Probe = %+v, want cpu cooperative, pids accounted, memory kernel through memory.max", caps)
	}
	applied, err := f.EnsureSlice(ctx, "coder", cgroup.Limits{CPUMilli: 500, MemoryBytes: 1 << 20, Tasks: 64})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Limits != (cgroup.Limits{MemoryBytes: 1 << 20}) || len(applied.Enforced) != 1 {
		t.Errorf("applied = %+v, want memory only", applied)
	}
	if _, err := os.Stat(filepath.Join(f.Mount(), "marshal.slice", "marshal-coder.slice", "pids.max")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pids.max without a pids controller: %v, want no file", err)
	}
}

// An injected fault fails the next n calls of its method, which change
// nothing, and every call is counted.
func TestFail(t *testing.T) {
	f := cgrouptest.New(t, cgrouptest.Options{})
	ctx := t.Context()
	injected := errors.New("injected")
	f.Fail(cgrouptest.OpEnsureSlice, 2, injected)
	for i := range 2 {
		if _, err := f.EnsureSlice(ctx, "coder", cgroup.Limits{}); !errors.Is(err, injected) {
			t.Errorf("call %d: EnsureSlice = %v, want the injected fault", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.Mount(), "marshal.slice")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed EnsureSlice made the tree: %v", err)
	}
	if _, err := f.EnsureSlice(ctx, "coder", cgroup.Limits{}); err != nil {
		t.Errorf("third EnsureSlice = %v, want success", err)
	}
	if n := f.Calls(cgrouptest.OpEnsureSlice); n != 3 {
		t.Errorf("Calls(EnsureSlice) = %d, want 3", n)
	}

	f.Fail(cgrouptest.OpWatch, 1, injected)
	if err := f.Watch(ctx, func(cgroup.Event) {}); !errors.Is(err, injected) {
		t.Errorf("Watch = %v, want the injected fault", err)
	}
	c := sleeper(t)
	f.Fail(cgrouptest.OpCreateScope, 1, injected)
	if _, _, err := f.CreateScope(ctx, "coder", scope.NewID(), c.PID(), cgroup.Limits{}); !errors.Is(err, injected) {
		t.Errorf("CreateScope = %v, want the injected fault", err)
	}
	if list, _ := f.ListScopes(ctx); len(list) != 0 {
		t.Errorf("scopes after a failed CreateScope = %+v, want none", list)
	}
}
