package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// child is a process started by a test, with pipes to its stdin and
// stdout, waited for by a goroutine the test's cleanup stops.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *bufio.Reader
	done   chan struct{}
	err    error
}

func startChild(t testing.TB, env []string, name string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(name, args...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// Plain files, not StdinPipe/StdoutPipe: Wait then leaves them alone,
	// and stdout reads to EOF once every process holding it is gone.
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, os.Stderr
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		t.Fatal(err)
	}
	c.stdin, c.stdout = inW, bufio.NewReader(outR)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
		inW.Close()
		outR.Close()
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// release writes the line the child waits for before it goes on.
func (c *child) release(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// lines reads what the child prints until it closes stdout.
func (c *child) lines(t testing.TB) []string {
	t.Helper()
	b, err := io.ReadAll(c.stdout)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// line reads one line the child prints.
func (c *child) line(t testing.TB) string {
	t.Helper()
	s, err := c.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading from pid %d: %v", c.pid(), err)
	}
	return strings.TrimSpace(s)
}

// wait waits for the child to exit and returns what Wait said.
func (c *child) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(testutil.Deadline):
		t.Fatalf("pid %d did not exit within %v", c.pid(), testutil.Deadline)
		return nil
	}
}

// killedBy reports whether err says the process died of signal sig.
func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
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
