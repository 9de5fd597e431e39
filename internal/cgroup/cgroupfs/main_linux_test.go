package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// helperEnv makes the test binary act as a helper process instead of
// running tests; see runHelper.
const helperEnv = "MARSHAL_CGROUPFS_TEST_HELPER"

// trees are the cgroup trees the package's tests made; TestMain checks
// that none is left in any hierarchy.
var (
	treesMu sync.Mutex
	trees   []*testutil.CgroupTree
)

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	code := m.Run()
	if code == 0 {
		treesMu.Lock()
		for _, tree := range trees {
			if tree.Exists() {
				fmt.Fprintf(os.Stderr, "cgroup tree left behind: %s\n", tree.Rel)
				code = 1
			}
		}
		treesMu.Unlock()
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
		if kids := leftoverChildren(); len(kids) > 0 {
			fmt.Fprintf(os.Stderr, "child processes left behind: %v\n", kids)
			code = 1
		}
	}
	os.Exit(code)
}

// runHelper runs helper h and returns its exit code.
//
//	alloc: after a line on stdin, allocates and touches memory in 1 MiB
//	       steps up to 1 GiB; prints "survived" if nothing stopped it.
//	new:   calls New with Mounts.V2 from $MARSHAL_CGROUPFS_TEST_MOUNT and
//	       prints the error.
func runHelper(h string) int {
	switch h {
	case "alloc":
		bufio.NewReader(os.Stdin).ReadString('\n')
		var keep [][]byte
		for range 1024 {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("survived", len(keep))
		return 0
	case "new":
		_, err := New(Options{Mounts: cgroup.Mounts{V2: os.Getenv("MARSHAL_CGROUPFS_TEST_MOUNT")}})
		if err == nil {
			fmt.Println("no error")
			return 1
		}
		fmt.Println(err)
		if !errors.Is(err, cgroup.ErrUnavailable) {
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", h)
	return 2
}

// newBackend makes a private cgroup tree and a backend rooted inside it.
func newBackend(t testing.TB) (*Backend, *testutil.CgroupTree) {
	t.Helper()
	tree := testutil.NewCgroupTree(t)
	treesMu.Lock()
	trees = append(trees, tree)
	treesMu.Unlock()
	b, err := New(Options{Root: tree.Rel + "/x", Mounts: tree.Mounts})
	if err != nil {
		t.Fatal(err)
	}
	return b, tree
}

// expectedMethod is how this host limits r, found by looking at the
// mounts the way an operator would: a controller listed at the cgroup2
// root is v2, else one with a v1 mount is v1.
func expectedMethod(t testing.TB, mounts cgroup.Mounts, r cgroup.Resource) cgroup.Method {
	t.Helper()
	avail, err := cgroup.ReadFile(mounts.V2, cgroup.FileControllers)
	if err != nil {
		t.Fatal(err)
	}
	switch ctrl := cgroup.Controller(r); {
	case slices.Contains(strings.Fields(avail), ctrl):
		return cgroup.MethodCgroupV2
	case mounts.V1[ctrl] != "":
		return cgroup.MethodCgroupV1
	}
	return ""
}

// requireMethod skips t when this host has no controller for r.
func requireMethod(t testing.TB, mounts cgroup.Mounts, r cgroup.Resource) cgroup.Method {
	t.Helper()
	m := expectedMethod(t, mounts, r)
	if m == "" {
		t.Skipf("needs a %s controller in cgroup v2 or v1", r)
	}
	return m
}

// startChild starts name with args and env added to the test's
// environment, killed when t ends.
func startChild(t testing.TB, env []string, name string, args ...string) *testutil.Child {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	return testutil.StartChild(t, cmd)
}

// procCgroupOf reads where pid is: its cgroup2 path and, per v1
// controller, its v1 path.
func procCgroupOf(t testing.TB, pid int) procCgroup {
	t.Helper()
	p, err := readProcCgroup(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// identityOf parses pid's cgroup2 path with the naming contract.
func identityOf(t testing.TB, pid int) scope.Identity {
	t.Helper()
	id, ok := scope.Parse(procCgroupOf(t, pid).v2)
	if !ok {
		t.Fatalf("pid %d is in %q, not in a marshal scope", pid, procCgroupOf(t, pid).v2)
	}
	return id
}

// recorder keeps the events a watch reported and wakes whoever waits for
// one.
type recorder struct {
	mu     sync.Mutex
	events []cgroup.Event
	wake   chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) add(ev cgroup.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// of returns the types of the events reported for scope name, in order.
func (r *recorder) of(name string) []cgroup.EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	var types []cgroup.EventType
	for _, ev := range r.events {
		if ev.Scope.Name == name {
			types = append(types, ev.Type)
		}
	}
	return types
}

// waitLast waits until the last event reported for scope name is typ.
func (r *recorder) waitLast(t testing.TB, name string, typ cgroup.EventType) {
	t.Helper()
	testutil.Eventually(t, r.wake, func() bool {
		types := r.of(name)
		return len(types) > 0 && types[len(types)-1] == typ
	}, name+" "+typ.String())
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readInt reads an integer file.
func readInt(t testing.TB, path string) int64 {
	t.Helper()
	v, err := cgroup.ReadInt(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readKeyed returns the value of key in a flat keyed file such as
// memory.oom_control.
func readKeyed(t testing.TB, path, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s has no %q", path, key)
	return 0
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
