package cgroup_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

var lifecycle = []cgroup.EventType{cgroup.ScopeCreated, cgroup.ScopePopulated, cgroup.ScopeEmptied, cgroup.ScopeRemoved}

func TestWatchTreeReportsAScopeLifeInOrder(t *testing.T) {
	tree, dir := newTree(t)
	slice := mkdir(t, dir, scope.SliceName("coder"))
	rec := watch(t, tree.Mounts.V2, dir)

	name := scope.ScopeName("coder", scope.NewID())
	scopeDir := mkdir(t, slice, name)
	rec.waitLast(t, name, cgroup.ScopeCreated)

	c := startChild(t, "sleep", "60")
	if err := cgroup.MoveProcess(cgroup.Host, scopeDir, c.PID()); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, name, cgroup.ScopePopulated)

	if err := cgroup.KillGroup(cgroup.Host, scopeDir); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, name, cgroup.ScopeEmptied)
	c.Wait(t)

	if err := cgroup.RemoveGroup(cgroup.Host, scopeDir); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, name, cgroup.ScopeRemoved)

	if got := rec.of(name); !slices.Equal(got, lifecycle) {
		t.Errorf("events for %s = %v, want %v", name, got, lifecycle)
	}
	for _, ev := range rec.all() {
		if ev.Resync {
			t.Errorf("event %v %s has Resync set, want it only after a relist", ev.Type, ev.Scope.Name)
		}
		want, _ := scope.Parse(ev.Scope.Path)
		if ev.Scope.Profile != "coder" || ev.Scope.ID != want.ID || ev.Scope.Path != filepath.Join(tree.Rel, "marshal.slice", scope.SliceName("coder"), name) {
			t.Errorf("event scope = %+v, want profile coder, path relative to the cgroup2 mount", ev.Scope)
		}
	}
}

func TestWatchTreeStartsWithARelist(t *testing.T) {
	tree, dir := newTree(t)
	slice := mkdir(t, dir, scope.SliceName("coder"))
	empty := scope.ScopeName("coder", scope.NewID())
	busy := scope.ScopeName("coder", scope.NewID())
	mkdir(t, slice, empty)
	busyDir := mkdir(t, slice, busy)
	c := startChild(t, "sleep", "60")
	if err := cgroup.MoveProcess(cgroup.Host, busyDir, c.PID()); err != nil {
		t.Fatal(err)
	}
	mkdir(t, dir, "not-a-marshal-slice")
	mkdir(t, slice, "not-a-scope")

	rec := watch(t, tree.Mounts.V2, dir)
	rec.waitFor(t, "the initial relist", func() bool { return len(rec.all()) >= 3 })

	want := []cgroup.Event{
		{Type: cgroup.ScopeCreated, Scope: cgroup.Scope{Name: busy, Populated: true}, Resync: true},
		{Type: cgroup.ScopePopulated, Scope: cgroup.Scope{Name: busy, Populated: true}, Resync: true},
		{Type: cgroup.ScopeCreated, Scope: cgroup.Scope{Name: empty}, Resync: true},
	}
	if busy > empty { // the relist goes in name order
		want = []cgroup.Event{want[2], want[0], want[1]}
	}
	checkEvents(t, rec.all(), want)
}

// checkEvents compares events by type, scope name, populated and resync.
func checkEvents(t *testing.T, got, want []cgroup.Event) {
	t.Helper()
	strip := func(evs []cgroup.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, fmt.Sprintf("%v %s populated=%v resync=%v", ev.Type, ev.Scope.Name, ev.Scope.Populated, ev.Resync))
		}
		return out
	}
	if g, w := strip(got), strip(want); !slices.Equal(g, w) {
		t.Errorf("events:\n got %q\nwant %q", g, w)
	}
}

func TestWatchTreeReportsEveryScopeOfABurst(t *testing.T) {
	const slicesN, perSlice = 4, 50 // 200 scopes
	tree, dir := newTree(t)
	rec := watch(t, tree.Mounts.V2, dir)

	// Slices are made after the watch started, each immediately filled,
	// so that scopes land both before and after the slice is watched.
	var names []string
	for i := range slicesN {
		profile := fmt.Sprintf("burst-%d", i)
		slice := mkdir(t, dir, scope.SliceName(profile))
		for range perSlice {
			name := scope.ScopeName(profile, scope.NewID())
			mkdir(t, slice, name)
			names = append(names, name)
		}
	}
	rec.waitFor(t, "200 ScopeCreated", func() bool { return rec.count(cgroup.ScopeCreated) >= len(names) })
	created := map[string]int{}
	for _, ev := range rec.all() {
		if ev.Type == cgroup.ScopeCreated {
			created[ev.Scope.Name]++
		}
	}
	for _, name := range names {
		if created[name] != 1 {
			t.Errorf("%s reported created %d times, want once", name, created[name])
		}
	}
	if len(created) != len(names) {
		t.Errorf("%d scopes reported created, want %d", len(created), len(names))
	}

	for i := range slicesN {
		slice := filepath.Join(dir, scope.SliceName(fmt.Sprintf("burst-%d", i)))
		for _, name := range names[i*perSlice : (i+1)*perSlice] {
			if err := cgroup.RemoveGroup(cgroup.Host, filepath.Join(slice, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec.waitFor(t, "200 ScopeRemoved", func() bool { return rec.count(cgroup.ScopeRemoved) >= len(names) })
	if n := rec.count(cgroup.ScopeRemoved); n != len(names) {
		t.Errorf("%d ScopeRemoved, want %d", n, len(names))
	}
}

func TestWatchTreeRelistAfterOverflowReportsResync(t *testing.T) {
	tree, dir := newTree(t)
	slice := mkdir(t, dir, scope.SliceName("coder"))
	kept := scope.ScopeName("coder", scope.NewID())
	gone := scope.ScopeName("coder", scope.NewID())
	keptDir := mkdir(t, slice, kept)
	goneDir := mkdir(t, slice, gone)

	rec := newRecorder()
	w, err := cgroup.NewTreeWatcherForTest(tree.Mounts.V2, dir, rec.add)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Relist(); err != nil {
		t.Fatal(err)
	}
	before := len(rec.all())

	// While "the queue overflowed", a scope is removed, one is populated,
	// and a new slice with a scope appears. The real inotify events are
	// never read: only the relist can report these.
	if err := cgroup.RemoveGroup(cgroup.Host, goneDir); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "sleep", "60")
	if err := cgroup.MoveProcess(cgroup.Host, keptDir, c.PID()); err != nil {
		t.Fatal(err)
	}
	newSlice := mkdir(t, dir, scope.SliceName("late"))
	added := scope.ScopeName("late", scope.NewID())
	mkdir(t, newSlice, added)

	if err := w.Overflow(); err != nil {
		t.Fatal(err)
	}
	// The relist goes slice by slice in name order (marshal-coder before
	// marshal-late), reporting changes to listed scopes, then removals.
	want := []cgroup.Event{
		{Type: cgroup.ScopePopulated, Scope: cgroup.Scope{Name: kept, Populated: true}, Resync: true},
		{Type: cgroup.ScopeRemoved, Scope: cgroup.Scope{Name: gone}, Resync: true},
		{Type: cgroup.ScopeCreated, Scope: cgroup.Scope{Name: added}, Resync: true},
	}
	checkEvents(t, rec.all()[before:], want)

	// Nothing changed since: a second overflow reports nothing.
	n := len(rec.all())
	if err := w.Overflow(); err != nil {
		t.Fatal(err)
	}
	if extra := rec.all()[n:]; len(extra) != 0 {
		checkEvents(t, extra, nil)
	}
}

func TestWatchTreeEndsWhenTheTreeIsRemoved(t *testing.T) {
	tree, dir := newTree(t)
	slice := mkdir(t, dir, scope.SliceName("coder"))
	name := scope.ScopeName("coder", scope.NewID())
	mkdir(t, slice, name)

	rec := newRecorder()
	done := make(chan error, 1)
	go func() { done <- cgroup.WatchTree(t.Context(), tree.Mounts.V2, dir, rec.add) }()
	rec.waitLast(t, name, cgroup.ScopeCreated)
	for _, d := range []string{filepath.Join(slice, name), slice, dir} {
		if err := cgroup.RemoveGroup(cgroup.Host, d); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, cgroup.ErrNotFound) {
			t.Errorf("WatchTree = %v, want ErrNotFound", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatal("WatchTree still running after its tree was removed")
	}
	if got := rec.of(name); !slices.Equal(got, []cgroup.EventType{cgroup.ScopeCreated, cgroup.ScopeRemoved}) {
		t.Errorf("events for %s = %v, want created, removed", name, got)
	}
}

func TestWatchTreeErrors(t *testing.T) {
	tree, dir := newTree(t)
	tests := []struct {
		name    string
		mount   string
		dir     string
		wantErr error
	}{
		{name: "missing_dir", mount: tree.Mounts.V2, dir: filepath.Join(dir, "nope"), wantErr: cgroup.ErrNotFound},
		{name: "dir_outside_mount", mount: tree.V2("marshal.slice", "x"), dir: dir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := cgroup.WatchTree(t.Context(), tc.mount, tc.dir, func(cgroup.Event) { t.Error("event reported") })
			if err == nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("WatchTree(%s) = %v, want %v", tc.dir, err, tc.wantErr)
			}
		})
	}
	t.Run("cancelled_context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := cgroup.WatchTree(ctx, tree.Mounts.V2, dir, func(cgroup.Event) {}); !errors.Is(err, context.Canceled) {
			t.Errorf("WatchTree = %v, want context.Canceled", err)
		}
	})
}

func TestWaitEvents(t *testing.T) {
	tree, _ := newTree(t)
	g := mkdir(t, tree.V2(), "g")
	c := startChild(t, "sleep", "60")
	if err := cgroup.MoveProcess(cgroup.Host, g, c.PID()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
	defer cancel()
	if err := cgroup.KillGroup(cgroup.Host, g); err != nil {
		t.Fatal(err)
	}
	ev, err := cgroup.WaitEvents(ctx, g, func(ev cgroup.GroupEvents) bool { return !ev.Populated })
	if err != nil || ev.Populated {
		t.Fatalf("WaitEvents(unpopulated) = %+v, %v", ev, err)
	}
	c.Wait(t)

	// A wait that cannot be met ends with its context, or with the group.
	short, cancelShort := context.WithCancel(t.Context())
	cancelShort()
	if _, err := cgroup.WaitEvents(short, g, func(ev cgroup.GroupEvents) bool { return ev.Populated }); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitEvents with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := cgroup.WaitEvents(ctx, filepath.Join(g, "nope"), func(cgroup.GroupEvents) bool { return true }); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("WaitEvents on a missing group = %v, want ErrNotFound", err)
	}
}

func TestGroupFilesOnARealTree(t *testing.T) {
	tree, _ := newTree(t)
	g := mkdir(t, tree.V2(), "g")
	sub := mkdir(t, g, "sub")

	// The shell forks only once moved, so that its children start in sub.
	parent := startChild(t, "sh", "-c", "read x; sleep 60 & sleep 60 & wait")
	if err := cgroup.MoveProcess(cgroup.Host, sub, parent.PID()); err != nil {
		t.Fatal(err)
	}
	parent.Say(t, "go")
	ev, err := cgroup.ReadEvents(g)
	if err != nil || !ev.Populated {
		t.Fatalf("ReadEvents of a group with a process below = %+v, %v; want populated", ev, err)
	}
	if procs, err := cgroup.ReadProcs(sub); err != nil || !slices.Contains(procs, parent.PID()) {
		t.Errorf("ReadProcs(sub) = %v, %v; want it to hold %d", procs, err, parent.PID())
	}
	if n, err := cgroup.CountThreads(g); err != nil || n < 1 {
		t.Errorf("CountThreads = %d, %v; want at least 1", n, err)
	}
	if st, err := cgroup.ReadCPUStat(g); err != nil || st.Usage < 0 {
		t.Errorf("ReadCPUStat = %+v, %v", st, err)
	}
	if err := cgroup.RemoveGroup(cgroup.Host, g); !errors.Is(err, cgroup.ErrBusy) {
		t.Errorf("RemoveGroup of a populated group = %v, want ErrBusy", err)
	}

	if err := cgroup.FreezeGroup(cgroup.Host, g, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
	defer cancel()
	if _, err := cgroup.WaitEvents(ctx, g, func(ev cgroup.GroupEvents) bool { return ev.Frozen }); err != nil {
		t.Fatal(err)
	}
	if err := cgroup.FreezeGroup(cgroup.Host, g, false); err != nil {
		t.Fatal(err)
	}

	// cgroup.kill on the parent kills the whole subtree.
	if err := cgroup.KillGroup(cgroup.Host, g); err != nil {
		t.Fatal(err)
	}
	if _, err := cgroup.WaitEvents(ctx, g, func(ev cgroup.GroupEvents) bool { return !ev.Populated }); err != nil {
		t.Fatal(err)
	}
	if err := parent.Wait(t); !isKilled(err) {
		t.Errorf("shell exited with %v, want killed", err)
	}
	for _, d := range []string{sub, g} {
		if err := cgroup.RemoveGroup(cgroup.Host, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := cgroup.RemoveGroup(cgroup.Host, g); err != nil {
		t.Errorf("RemoveGroup of a removed group = %v, want nil", err)
	}
	if err := cgroup.KillGroup(cgroup.Host, g); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("KillGroup of a removed group = %v, want ErrNotFound", err)
	}
}

func isKilled(err error) bool {
	var ee interface{ Sys() any }
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func TestMoveProcessOfAGoneProcess(t *testing.T) {
	tree, _ := newTree(t)
	g := mkdir(t, tree.V2(), "g")
	c := startChild(t, "true")
	c.Wait(t)
	if err := cgroup.MoveProcess(cgroup.Host, g, c.PID()); !errors.Is(err, cgroup.ErrNoProcess) {
		t.Errorf("MoveProcess of an exited, reaped pid = %v, want ErrNoProcess", err)
	}
	if err := cgroup.MoveProcess(cgroup.Host, filepath.Join(g, "nope"), os.Getpid()); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("MoveProcess into a missing group = %v, want ErrNotFound", err)
	}
}
