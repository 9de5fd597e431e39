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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// launchWorkspace is a Workspace of profile coder for launch tests.
type launchWorkspace struct {
	name          string
	participation string // required, optional or none
	maxLive       int
	// request, when set, is the resources.request block, indented.
	request string
	// argv0, when set, is the exec.argv0 list.
	argv0 []string
}

// launchManifests declares profile coder, the workspaces (all rooted at
// root) and, when capacity is set, a Host with that capacity and a short
// prepared_ttl.
func launchManifests(root string, capacity string, ws ...launchWorkspace) string {
	var b strings.Builder
	b.WriteString("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder}\nspec: {}\n")
	for _, w := range ws {
		fmt.Fprintf(&b, "---\napiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: %s}\nspec:\n  root: %s\n  profile: coder\n", w.name, root)
		fmt.Fprintf(&b, "  exec:\n    env: {TEAM: web}\n")
		if len(w.argv0) > 0 {
			fmt.Fprintf(&b, "    argv0: [%s]\n", strings.Join(w.argv0, ", "))
		}
		if w.maxLive > 0 {
			fmt.Fprintf(&b, "  processes: {max_live: %d}\n", w.maxLive)
		}
		fmt.Fprintf(&b, "  resources:\n    participation: %s\n", w.participation)
		if w.request != "" {
			fmt.Fprintf(&b, "    request:\n%s", w.request)
		}
	}
	if capacity != "" {
		fmt.Fprintf(&b, "---\napiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: local}\nspec:\n  capacity: %s\n  prepared_ttl: 1s\n", capacity)
	}
	return b.String()
}

// startLaunchDaemon starts marshald on the manifests and waits until
// every named workspace is Ready and the host's admission can decide.
func startLaunchDaemon(t testing.TB, manifests string, workspaces ...string) *daemon {
	t.Helper()
	d := newDaemon(t)
	d.write("all.yaml", manifests)
	d.start()
	d.waitReady(workspaces...)
	return d
}

// waitReady waits until every named workspace is Ready and the
// authority can decide.
func (d *daemon) waitReady(workspaces ...string) {
	t := d.t
	t.Helper()
	// The watches end here: a benchmark that follows times launches, not
	// the watchers' work on every status they change.
	w := d.watch("workspaces")
	defer w.stop()
	for _, name := range workspaces {
		w.until(t, name, "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
	}
	h := d.watch("hosts")
	defer h.stop()
	h.mu.Lock()
	var host string
	for name := range h.objects {
		host = name
	}
	h.mu.Unlock()
	if host == "" {
		host = "local"
	}
	h.until(t, host, "admission ready", func(o map[string]any) bool {
		return field(o, "status", "admission", "ready") == true
	})
}

// agentEnv is the environment agents are run with: this one, with the
// built binaries first on PATH, and without the race detector's pause at
// exit (a second, by default) in the binaries built with it.
func agentEnv(extra ...string) []string {
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// agent is a marshalctl run started in the background. Its output goes
// to files, so that waiting for it never waits for a process it left
// behind holding a pipe.
type agent struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *os.File
	done           chan struct{}
	err            error
}

// output returns what the agent wrote to standard output and error.
func (a *agent) output() (string, string) {
	out, _ := os.ReadFile(a.stdout.Name())
	errb, _ := os.ReadFile(a.stderr.Name())
	return string(out), string(errb)
}

// runCmd returns the command of marshalctl run with args, against d.
func (d *daemon) runCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, "marshalctl"), append([]string{"--socket", d.socket, "run"}, args...)...)
	cmd.Env = agentEnv()
	return cmd
}

// startRun starts marshalctl run with args; closing its stdin is what a
// blocking agent (one that reads it) waits for.
func (d *daemon) startRun(args ...string) *agent {
	d.t.Helper()
	return d.startCmd(d.runCmd(args...))
}

// startCmd starts cmd, a marshalctl run, as startRun does.
func (d *daemon) startCmd(cmd *exec.Cmd) *agent {
	d.t.Helper()
	a := &agent{cmd: cmd, done: make(chan struct{})}
	dir := d.t.TempDir()
	var err error
	if a.stdout, err = os.Create(filepath.Join(dir, "stdout")); err != nil {
		d.t.Fatal(err)
	}
	if a.stderr, err = os.Create(filepath.Join(dir, "stderr")); err != nil {
		d.t.Fatal(err)
	}
	a.cmd.Stdout, a.cmd.Stderr = a.stdout, a.stderr
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		d.t.Fatal(err)
	}
	if err := d.startProcess(a.cmd); err != nil {
		d.t.Fatal(err)
	}
	go func() { a.err = a.cmd.Wait(); close(a.done) }()
	d.t.Cleanup(func() {
		a.cmd.Process.Kill()
		<-a.done
		a.stdout.Close()
		a.stderr.Close()
	})
	return a
}

// wait waits for the agent to end and returns its exit code (-1 when a
// signal ended it).
func (a *agent) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(testutil.Deadline):
		t.Fatalf("marshalctl run %v did not end", a.cmd.Args)
	}
	var ee *exec.ExitError
	switch {
	case a.err == nil:
		return 0
	case errors.As(a.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("marshalctl run: %v", a.err)
	return 0
}

// runNow runs marshalctl run with args to its end.
func (d *daemon) runNow(args ...string) result {
	d.t.Helper()
	a := d.startRun(args...)
	a.stdin.Close()
	code := a.wait(d.t)
	stdout, stderr := a.output()
	return result{stdout: stdout, stderr: stderr, code: code}
}

// waitFiles waits until dir holds at least n files whose names start
// with prefix, woken by inotify, and returns their number.
func waitFiles(t testing.TB, dir, prefix string, n int) int {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	var got int
	testutil.Eventually(t, w.Events, func() bool {
		got = countFiles(t, dir, prefix)
		return got >= n
	}, fmt.Sprintf("%d files %s* in %s", n, prefix, dir))
	return got
}

func countFiles(t testing.TB, dir, prefix string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

// admission is the host's admission status.
type admissionView struct {
	Committed struct {
		CPUMilli    int64 `json:"cpu_milli"`
		MemoryBytes int64 `json:"memory_bytes"`
		Tasks       int64 `json:"tasks"`
	} `json:"committed"`
	Charged int64 `json:"charged"`
}

// admission reads the host's admission status from the local API.
func (d *daemon) admission() admissionView {
	d.t.Helper()
	var list struct {
		Items []struct {
			Status struct {
				Admission admissionView `json:"admission"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(d.get("/v1/objects/hosts"), &list); err != nil || len(list.Items) != 1 {
		d.t.Fatalf("listing hosts: %v", err)
	}
	return list.Items[0].Status.Admission
}

// get answers a GET of path on marshald's socket.
func (d *daemon) get(path string) []byte {
	d.t.Helper()
	resp, err := d.http().Get("http://marshald" + path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, data)
	}
	return data
}

// http is a client of marshald's socket.
func (d *daemon) http() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", d.socket)
		},
	}}
}

// waitSettled waits until nothing is charged and no workspace holds a
// slot or a live process.
func (d *daemon) waitSettled(t testing.TB) {
	t.Helper()
	// The watches end here, as waitReady's do: what follows, a
	// benchmark's next launches among it, runs without two watchers woken
	// by every status it changes.
	hosts := d.watch("hosts")
	defer hosts.stop()
	workspaces := d.watch("workspaces")
	defer workspaces.stop()
	testutil.Eventually(t, merge(t, hosts.wake, workspaces.wake), func() bool {
		// Until each watch has delivered the current objects, nothing is
		// known: an empty map is not an idle daemon.
		hosts.mu.Lock()
		defer hosts.mu.Unlock()
		workspaces.mu.Lock()
		defer workspaces.mu.Unlock()
		if len(hosts.objects) == 0 || len(workspaces.objects) == 0 {
			return false
		}
		for _, raw := range hosts.objects {
			var o map[string]any
			json.Unmarshal(raw, &o)
			if field(o, "status", "admission", "charged") != 0.0 {
				return false
			}
		}
		for _, raw := range workspaces.objects {
			var o map[string]any
			json.Unmarshal(raw, &o)
			if field(o, "status", "live") != 0.0 || field(o, "status", "reserved") != nil {
				return false
			}
		}
		return true
	}, "nothing charged, no live agents, no slots held")
}

// merge delivers on its channel whenever any of ins delivers, until the
// test ends.
func merge(t testing.TB, ins ...chan struct{}) chan struct{} {
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-in:
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return out
}

// metric scrapes marshald's /metrics on its socket and returns the value
// of the sample named exactly series (with its labels), 0 when absent.
func (d *daemon) metric(series string) float64 {
	d.t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(d.get("/metrics")))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// scopeDirs lists the scope directories in the daemon's cgroup tree.
func (d *daemon) scopeDirs() []string {
	d.t.Helper()
	var out []string
	slices := d.tree.V2("marshal", "marshal.slice")
	entries, _ := os.ReadDir(slices)
	for _, sl := range entries {
		scopes, _ := os.ReadDir(filepath.Join(slices, sl.Name()))
		for _, sc := range scopes {
			if sc.IsDir() && strings.HasSuffix(sc.Name(), ".scope") {
				out = append(out, sc.Name())
			}
		}
	}
	return out
}
