//go:build linux

package test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// Killing marshald (SIGKILL) while launches are in flight, and starting
// it again, leaks nothing: prepared attempts expire, committed ones are
// released on the evidence of their scopes' end or abandoned when they
// made none, and every slot is free again.
func TestKillingTheDaemonMidLaunchLeaksNothing(t *testing.T) {
	const callers = 16
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy,
		launchWorkspace{name: "web", participation: "required", maxLive: callers}), "web")

	// Callers launch in a loop until marshald dies under them; a run cut
	// off mid-request says the daemon went away.
	cut := 0
	for round := 1; cut == 0; round++ {
		if round > 5 {
			t.Fatal("no launch was in flight when marshald was killed, in 5 rounds")
		}
		var (
			wg        sync.WaitGroup
			started   atomic.Int64
			cutHere   atomic.Int64
			enough    = make(chan struct{})
			enoughOne sync.Once
		)
		for range callers {
			wg.Go(func() {
				for {
					cmd := d.runCmd("-w", "web", "--", "true")
					out, err := cmd.CombinedOutput()
					switch {
					case err == nil:
						if started.Add(1) >= 2*callers {
							enoughOne.Do(func() { close(enough) })
						}
						continue
					case strings.Contains(string(out), "went away during the run request"):
						cutHere.Add(1)
					}
					return // marshald is gone
				}
			})
		}
		select {
		case <-enough:
		case <-time.After(testutil.Deadline):
			t.Fatal("the callers did not get going")
		}
		d.cmd.Process.Kill()
		<-d.exited
		wg.Wait()
		cut = int(cutHere.Load())
		t.Logf("round %d: %d launches started, %d cut off by the kill", round, started.Load(), cut)
		d.start()
		d.waitReady("web")
	}
	d.waitSettled(t)
	if dirs := d.scopeDirs(); len(dirs) != 0 {
		t.Errorf("scopes left: %v", dirs)
	}

	// Every slot is free: max_live callers run at once.
	var agents []*agent
	for range callers {
		agents = append(agents, d.startRun(append([]string{"-w", "web"}, blockingAgent...)...))
	}
	waitFiles(t, root, "m-", callers)
	for _, a := range agents {
		a.stdin.Close()
		if code := a.wait(t); code != 0 {
			_, stderr := a.output()
			t.Errorf("a run after the restart: exit %d: %s", code, stderr)
		}
	}
	d.waitSettled(t)
}
