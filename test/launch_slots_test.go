//go:build linux

package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// roomy is a Host capacity that admits every request of these tests: the
// measured one of a small machine admits only a few.
const roomy = "{cpu_milli: 64000, memory_bytes: 68719476736, tasks: 65536}"

// blockingAgent is an agent that marks that it runs, with a file m-PID in
// the workspace root, and runs until its standard input is closed.
var blockingAgent = []string{"--", "sh", "-c", `touch "m-$$"; read x; exit 0`}

// With max_live 8, eight agents run and a ninth request is refused before
// it creates anything; each running agent holds its reservation until it
// exits, and then it is back.
func TestRunNinthRequestCreatesNoChild(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy, launchWorkspace{name: "web", participation: "required", maxLive: 8}), "web")
	var agents []*agent
	for range 8 {
		agents = append(agents, d.startRun(append([]string{"-w", "web"}, blockingAgent...)...))
	}
	waitFiles(t, root, "m-", 8)
	workspaces := d.watch("workspaces")
	workspaces.until(t, "web", "8 live", func(o map[string]any) bool { return field(o, "status", "live") == 8.0 })
	// Each agent says where it was launched and which attempt holds its
	// reservation: the scope's own ID.
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(d.get("/v1/objects/agents"), &list); err != nil || len(list.Items) != 8 {
		t.Fatalf("agents: %d, %v", len(list.Items), err)
	}
	for _, a := range list.Items {
		if field(a, "status", "workspace") != "web" || field(a, "status", "attempt") != field(a, "status", "id") {
			t.Errorf("agent %v: workspace %v, attempt %v; want web and its id", field(a, "metadata", "name"),
				field(a, "status", "workspace"), field(a, "status", "attempt"))
		}
	}
	if a := d.admission(); a.Charged != 8 || a.Committed.MemoryBytes != 8*268435456 {
		t.Errorf("admission while 8 run = %+v, want 8 reservations", a)
	}

	r := d.runNow(append([]string{"-w", "web"}, blockingAgent...)...)
	if r.code != 75 || !strings.HasPrefix(r.stderr, "WORKSPACE_BUSY: live process limit reached (8 of 8)\nattempt -, process ") ||
		!strings.HasSuffix(r.stderr, "state not_asked; nothing was started\n") {
		t.Fatalf("ninth run = exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if n := countFiles(t, root, "m-"); n != 8 {
		t.Fatalf("%d agents ran, want 8: the ninth created a child", n)
	}
	for _, a := range agents {
		a.stdin.Close()
		if code := a.wait(t); code != 0 {
			t.Errorf("agent exit %d", code)
		}
	}
	d.waitSettled(t)
}

// Twelve requests racing for three slots start exactly three agents.
func TestRunTwelveRacingRequestsGetThreeSlots(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required", maxLive: 3}), "web")
	var (
		agents []*agent
		start  = make(chan struct{})
		wg     sync.WaitGroup
		mu     sync.Mutex
	)
	for range 12 {
		wg.Go(func() {
			<-start
			a := d.startRun(append([]string{"-w", "web"}, blockingAgent...)...)
			mu.Lock()
			agents = append(agents, a)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	// Each run is refused, or runs its agent: the marker m-PID says so, PID
	// being marshalctl's, which the agent is.
	var running []*agent
	refused := 0
	for _, a := range agents {
		if a.startedOrEnded(t, root) {
			running = append(running, a)
			continue
		}
		if code := a.wait(t); code != 75 {
			_, stderr := a.output()
			t.Errorf("a run ended with %d: %s", code, stderr)
		}
		refused++
	}
	if refused != 9 || len(running) != 3 || countFiles(t, root, "m-") != 3 {
		t.Fatalf("%d refused, %d running, %d markers; want 9, 3, 3", refused, len(running), countFiles(t, root, "m-"))
	}
	for _, a := range running {
		a.stdin.Close()
		a.wait(t)
	}
	d.waitSettled(t)
}

// startedOrEnded waits until a's blocking agent runs (its marker m-PID is
// in dir) or its run ended, and reports whether it runs.
func (a *agent) startedOrEnded(t testing.TB, dir string) bool {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "m-"+strconv.Itoa(a.cmd.Process.Pid))
	deadline := time.NewTimer(testutil.Deadline)
	defer deadline.Stop()
	for {
		if _, err := os.Stat(marker); err == nil {
			return true
		}
		select {
		case <-a.done:
			_, err := os.Stat(marker)
			return err == nil
		case <-w.Events:
		case <-deadline.C:
			t.Fatalf("run %d neither started nor ended", a.cmd.Process.Pid)
		}
	}
}

// An occupied slot is refused before the authority is asked: the
// admissions count does not move.
func TestRunOccupiedSlotIsRefusedBeforeAdmission(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required", maxLive: 1}), "web")
	a := d.startRun(append([]string{"-w", "web"}, blockingAgent...)...)
	waitFiles(t, root, "m-", 1)
	const prepared = `marshal_admissions_total{result="prepared"}`
	if got := d.metric(prepared); got != 1 {
		t.Fatalf("%s = %v, want 1", prepared, got)
	}
	if r := d.runNow("-w", "web", "--", "true"); r.code != 75 {
		t.Fatalf("second run = exit %d, %s", r.code, r.stderr)
	}
	if got := d.metric(prepared); got != 1 {
		t.Errorf("%s = %v after the busy refusal, want 1: the authority was asked", prepared, got)
	}
	if got := d.metric(`marshal_launch_duration_seconds_count{result="workspace_busy"}`); got != 1 {
		t.Errorf("busy launches counted %v, want 1", got)
	}
	if ad := d.admission(); ad.Charged != 1 {
		t.Errorf("charged %d, want the running agent's 1", ad.Charged)
	}
	a.stdin.Close()
	a.wait(t)
	d.waitSettled(t)
}
