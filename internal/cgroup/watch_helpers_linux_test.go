package cgroup_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// trees are the cgroup trees the package's tests made; TestMain checks
// that none is left in any hierarchy.
var (
	treesMu sync.Mutex
	trees   []*testutil.CgroupTree
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		treesMu.Lock()
		for _, tree := range trees {
			if tree.Exists() {
				os.Stderr.WriteString("cgroup tree left behind: " + tree.Rel + "\n")
				code = 1
			}
		}
		treesMu.Unlock()
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goroutines left behind: " + err.Error() + "\n")
			code = 1
		}
		if kids := leftoverChildren(); len(kids) > 0 {
			os.Stderr.WriteString("child processes left behind: " + strings.Join(kids, " ") + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// newTree makes a private cgroup tree with an empty marshal.slice in it
// and returns the tree and the slice's absolute cgroup2 path.
func newTree(t testing.TB) (*testutil.CgroupTree, string) {
	t.Helper()
	tree := testutil.NewCgroupTree(t)
	treesMu.Lock()
	trees = append(trees, tree)
	treesMu.Unlock()
	dir := tree.V2("marshal.slice")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return tree, dir
}

func mkdir(t testing.TB, parts ...string) string {
	t.Helper()
	dir := filepath.Join(parts...)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startChild starts name with args, killed when t ends.
func startChild(t testing.TB, name string, args ...string) *testutil.Child {
	t.Helper()
	return testutil.StartChild(t, exec.Command(name, args...))
}

// recorder keeps the events a watch reported and wakes whoever waits for
// one.
type recorder struct {
	mu     sync.Mutex
	events []cgroup.Event
	wake   chan struct{}

	// ready is closed at the first event of a scope of profile marker,
	// which is not recorded.
	marker    string
	ready     chan struct{}
	readyOnce sync.Once
}

func newRecorder() *recorder {
	return &recorder{wake: make(chan struct{}, 1), ready: make(chan struct{})}
}

func (r *recorder) add(ev cgroup.Event) {
	if r.marker != "" && ev.Scope.Profile == r.marker {
		r.readyOnce.Do(func() { close(r.ready) })
		return
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []cgroup.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// of returns the types of the events reported for scope name, in order.
func (r *recorder) of(name string) []cgroup.EventType {
	var types []cgroup.EventType
	for _, ev := range r.all() {
		if ev.Scope.Name == name {
			types = append(types, ev.Type)
		}
	}
	return types
}

// count returns how many events of type typ were reported.
func (r *recorder) count(typ cgroup.EventType) int {
	n := 0
	for _, ev := range r.all() {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// waitFor waits until cond holds for the events reported so far.
func (r *recorder) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, r.wake, cond, what)
}

// waitLast waits until the last event reported for scope name is typ.
func (r *recorder) waitLast(t testing.TB, name string, typ cgroup.EventType) {
	t.Helper()
	r.waitFor(t, name+" "+typ.String(), func() bool {
		types := r.of(name)
		return len(types) > 0 && types[len(types)-1] == typ
	})
}

// markerProfile names the slice whose scope tells that a watch has made
// its initial relist.
const markerProfile = "watch-ready"

// watch runs WatchTree on dir until the test ends, and checks that it
// then returns context.Canceled. It returns once the initial relist is
// done, so that what the test does next is reported as events.
func watch(t testing.TB, mount, dir string) *recorder {
	t.Helper()
	slice := filepath.Join(dir, scope.SliceName(markerProfile))
	if err := os.MkdirAll(filepath.Join(slice, scope.ScopeName(markerProfile, scope.NewID())), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	rec := newRecorder()
	rec.marker = markerProfile
	done := make(chan error, 1)
	go func() { done <- cgroup.WatchTree(ctx, mount, dir, rec.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("WatchTree returned %v, want context.Canceled", err)
		}
	})
	select {
	case <-rec.ready:
	case err := <-done:
		done <- err
		t.Fatalf("WatchTree: %v", err)
	case <-time.After(testutil.Deadline):
		t.Fatalf("WatchTree made no initial relist within %v", testutil.Deadline)
	}
	return rec
}

// leftoverChildren lists the test process's children that are still
// running or not reaped, from /proc/self/task/*/children.
func leftoverChildren() []string {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var kids []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}
