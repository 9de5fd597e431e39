//go:build linux

package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/testutil/kubetest"
)

// bin holds the binaries built once for the package.
var bin string

func TestMain(m *testing.M) {
	if mode := os.Getenv(clientEnv); mode != "" {
		os.Exit(runClient(mode))
	}
	if role := os.Getenv(childRoleEnv); role != "" {
		// This binary run again as a child of a test, in a role of its
		// own.
		os.Exit(runChild(role, os.Args[1:]))
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "marshal-e2e-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	defer kubetest.StopShared()
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/marshald", "../cmd/marshalctl", "../cmd/marshal-devguard-launch")...)
	if !raceEnabled {
		// As make build does: the race detector needs cgo, the rest not.
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building the binaries: %w", err)
	}
	if _, err := testutil.BuildConfine(dir); err != nil {
		return 0, err
	}
	bin = dir
	return m.Run(), nil
}

// daemon is one marshald run by a test.
type daemon struct {
	t       testing.TB
	config  string // config dir
	state   string // state dir
	socket  string
	root    string // cgroup root relative to the cgroup2 mount
	tree    *testutil.CgroupTree
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{}
	waitErr error
	// egressDefault leaves marshald its default egress address.
	egressDefault bool
	// env is added to marshald's environment.
	env []string
	// spawn, when set, starts marshald's process and every marshalctl's
	// instead of their Start: in a network namespace of the test's, for
	// one. The callers share marshald's namespace, as a user's shell
	// does; a caller in another one counts as an agent.
	spawn func(start func() error) error
}

// startProcess starts cmd through spawn, if set.
func (d *daemon) startProcess(cmd *exec.Cmd) error {
	if d.spawn == nil {
		return cmd.Start()
	}
	return d.spawn(cmd.Start)
}

type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	wake chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newDaemon prepares a daemon on fresh directories and a private cgroup
// subtree; start runs it.
func newDaemon(t testing.TB) *daemon {
	t.Helper()
	tree := testutil.NewCgroupTree(t)
	dir := t.TempDir()
	d := &daemon{
		t:      t,
		config: filepath.Join(dir, "manifests.d"),
		state:  filepath.Join(dir, "state"),
		socket: filepath.Join(dir, "run", "marshal.sock"),
		root:   tree.Rel + "/marshal",
		tree:   tree,
	}
	if err := os.MkdirAll(d.config, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// args are marshald's arguments on d's directories, then extra.
func (d *daemon) args(extra ...string) []string {
	// No test here is about pressure: the host's load (PSI, a busy CI
	// machine) must not decide what is admitted. Tests run at once, so
	// none may hold a fixed port.
	args := []string{
		"--config-dir", d.config, "--state-dir", d.state, "--socket", d.socket,
		"--backend", "cgroupfs", "--cgroup-root", d.root, "--pressure", "off",
	}
	if !d.egressDefault {
		// The egress proxy's default address is one per uid: tests that
		// want the proxy give their own (port 0), the others take none.
		args = append(args, "--egress-address", "off")
	}
	return append(args, extra...)
}

// start runs marshald and waits until it reports ready.
func (d *daemon) start(extra ...string) {
	t := d.t
	t.Helper()
	d.log = &syncBuffer{wake: make(chan struct{}, 1)}
	d.cmd = exec.Command(filepath.Join(bin, "marshald"), d.args(extra...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if d.env != nil {
		d.cmd.Env = append(os.Environ(), d.env...)
	}
	if err := d.startProcess(d.cmd); err != nil {
		t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		if d.running() {
			d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("marshald log:\n%s", d.log.String())
		}
	})
	deadline := time.NewTimer(testutil.Deadline)
	defer deadline.Stop()
	for !strings.Contains(d.log.String(), "msg=ready") {
		select {
		case <-d.log.wake:
		case <-d.exited:
			t.Fatalf("marshald exited before ready: %v\n%s", d.waitErr, d.log.String())
		case <-deadline.C:
			t.Fatalf("marshald not ready after %v:\n%s", testutil.Deadline, d.log.String())
		}
	}
}

func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return d.exited != nil
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(testutil.Deadline):
		d.t.Fatal("marshald did not stop on SIGTERM")
	}
	if d.waitErr != nil {
		d.t.Fatalf("marshald exited with %v after SIGTERM:\n%s", d.waitErr, d.log.String())
	}
}

// result is what a marshalctl run printed and how it ended.
type result struct {
	stdout, stderr string
	code           int
}

// ctl runs marshalctl against the daemon.
func (d *daemon) ctl(args ...string) result {
	d.t.Helper()
	return d.ctlIn(nil, args...)
}

func (d *daemon) ctlIn(stdin io.Reader, args ...string) result {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "marshalctl"), append([]string{"--socket", d.socket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := d.startProcess(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if ctx.Err() != nil {
		d.t.Fatalf("marshalctl %s did not finish within %v", strings.Join(args, " "), testutil.Deadline)
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		d.t.Fatalf("marshalctl %v: %v", args, err)
	}
	return r
}

// mustCtl runs marshalctl and fails the test unless it exits 0.
func (d *daemon) mustCtl(args ...string) string {
	d.t.Helper()
	r := d.ctl(args...)
	if r.code != 0 {
		d.t.Fatalf("marshalctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// write writes a manifest into the config dir.
func (d *daemon) write(name, content string) {
	d.t.Helper()
	path := filepath.Join(d.config, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// watch follows `marshalctl get KIND -w -o json` and keeps the latest
// version of every object by name.
type watch struct {
	mu      sync.Mutex
	objects map[string]json.RawMessage
	// observed is each object's status.observedGeneration.
	observed map[string]int64
	wake     chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
	// stop ends the watch and waits for its marshalctl; once.
	stop func()
}

func (d *daemon) watch(kind string) *watch {
	t := d.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "marshalctl"), "--socket", d.socket, "get", kind, "-w", "-o", "json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watch{objects: map[string]json.RawMessage{}, observed: map[string]int64{}, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		dec := json.NewDecoder(bufio.NewReader(out))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return
			}
			w.add(raw)
		}
	}()
	w.stop = sync.OnceFunc(func() {
		cancel()
		cmd.Wait()
		<-w.done
	})
	t.Cleanup(w.stop)
	return w
}

// header is what the watch reads of every object.
type header struct {
	Items    []json.RawMessage `json:"items"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
	} `json:"status"`
}

func (w *watch) add(raw json.RawMessage) {
	var obj header
	if json.Unmarshal(raw, &obj) != nil {
		return
	}
	items := []json.RawMessage{raw}
	if obj.Items != nil {
		items = obj.Items
	}
	w.mu.Lock()
	for _, it := range items {
		var h header
		json.Unmarshal(it, &h)
		w.objects[h.Metadata.Name] = it
		w.observed[h.Metadata.Name] = h.Status.ObservedGeneration
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// until waits until cond holds for the latest version of object name
// (nil when not seen).
func (w *watch) until(t testing.TB, name, what string, cond func(obj map[string]any) bool) map[string]any {
	t.Helper()
	var last map[string]any
	testutil.Eventually(t, w.wake, func() bool {
		w.mu.Lock()
		raw := w.objects[name]
		w.mu.Unlock()
		last = nil
		if raw != nil {
			json.Unmarshal(raw, &last)
		}
		return cond(last)
	}, fmt.Sprintf("%s %s", name, what))
	return last
}

// condition returns the condition of type typ of obj, or nil.
func condition(obj map[string]any, typ string) map[string]any {
	st, _ := obj["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

func conditionIs(obj map[string]any, typ, status string) bool {
	c := condition(obj, typ)
	return c != nil && c["status"] == status
}

// field walks obj along path.
func field(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}
