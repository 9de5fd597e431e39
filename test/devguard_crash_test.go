//go:build linux

package test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/devguardwire/devguardtest"
)

// A kill of marshald between any two requests of DevGuard's wire loses
// and double-counts nothing: after every request marshald is killed
// (SIGKILL) and started again, the instance registers again, and every
// attempt answered before is looked up, in the phase it was answered in
// or the one a restart makes of it, with what the charged ones hold
// exactly what the host says is committed.
func TestDevGuardKillBetweenRequestsLosesNothing(t *testing.T) {
	g := startDevGuard(t)
	huge := dgAdmission("a3")
	huge.Intent.Requested.CPUMilli = 1 << 40
	steps := []struct {
		name string
		do   func(c *devguardtest.Client) (devguardtest.Record, error)
	}{
		{"admit a1", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Admit(dgAdmission("a1")) }},
		{"admit a2", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Admit(dgAdmission("a2")) }},
		{"begin a1", func(c *devguardtest.Client) (devguardtest.Record, error) {
			gr, err := c.BeginLaunch(dgAdmission("a1").Key)
			return gr.Attempt, err
		}},
		{"cancel a2", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Cancel(dgAdmission("a2").Key) }},
		{"admit a3, denied", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Admit(huge) }},
		{"replay a1's admission", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Admit(dgAdmission("a1")) }},
		{"abandon a1", func(c *devguardtest.Client) (devguardtest.Record, error) {
			return c.AbandonLaunch(dgAdmission("a1").Key, "grant_not_received")
		}},
		{"admit a4", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Admit(dgAdmission("a4")) }},
		{"begin a4", func(c *devguardtest.Client) (devguardtest.Record, error) {
			gr, err := c.BeginLaunch(dgAdmission("a4").Key)
			return gr.Attempt, err
		}},
		{"cancel a4", func(c *devguardtest.Client) (devguardtest.Record, error) { return c.Cancel(dgAdmission("a4").Key) }},
	}
	answered := map[string]devguardtest.Record{}
	for _, st := range steps {
		c, _ := g.session(t, "codespace-a")
		r, err := st.do(c)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		answered[r.Key.AttemptID] = r
		c.Close()

		g.kill()
		g.start()
		l, in := g.session(t, "codespace-a")
		var charged devguardtest.Budget
		for id, was := range answered {
			s, _ := g.session(t, "codespace-a")
			now, err := s.Lookup(dgAdmission(id).Key)
			if err != nil {
				t.Fatalf("after %s and a kill: lookup %s = %v, want the attempt answered before", st.name, id, err)
			}
			if !restartMade(was.Phase, now.Phase) || now.Owner != in || now.RequestFingerprint != was.RequestFingerprint {
				t.Errorf("after %s and a kill: %s is %s of %+v, was %s of %+v", st.name, id, now.Phase, now.Owner, was.Phase, was.Owner)
			}
			if chargedPhase(now.Phase) {
				charged.CPUMilli += now.Reservation.Quantities.CPUMilli
				charged.MemoryBytes += now.Reservation.Quantities.MemoryBytes
				charged.Tasks += now.Reservation.Quantities.Tasks
			}
			answered[id] = now
		}
		l.Close()
		c2 := g.committed()
		if uint64(c2["cpu_milli"].(float64)) != charged.CPUMilli || uint64(c2["memory_bytes"].(float64)) != charged.MemoryBytes ||
			uint64(c2["tasks"].(float64)) != charged.Tasks {
			t.Errorf("after %s and a kill: committed %v, the charged attempts hold %+v", st.name, c2, charged)
		}
	}
}

// restartMade reports whether a restart may have made phase now of an
// attempt answered in phase was: the same, or, for a committed launch
// whose scope no one saw, suspect until evidence settles it.
func restartMade(was, now string) bool {
	switch {
	case was == now:
		return true
	case was == "launch_committed" || was == "scope_bound" || was == "run_authorized":
		return now == "suspect"
	}
	return false
}

func chargedPhase(p string) bool {
	switch p {
	case "prepared", "launch_committed", "scope_bound", "run_authorized", "draining", "suspect":
		return true
	}
	return false
}

// A kill of marshald while a helper's program runs in its attempt's scope
// loses nothing: the program goes on in the scope; the restarted marshald
// answers the owner, registered again, with the attempt charged once,
// suspect until evidence settles it, its scope and helper kept; and once
// the program ends, the attempt is released on that evidence and nothing
// is charged.
func TestDevGuardKillWhileAHelpersProgramRunsLosesNothing(t *testing.T) {
	g := startDevGuard(t)
	a, in, permit := g.grant(t, "run-1")
	stdin, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	h := g.startHelper(t, "run-1", in.InstanceID, permit, stdin, "/bin/sh", "-c", "read line; exit 3")
	stdin.Close()
	if lines := h.transcript(t); len(lines) != 1 || lines[0]["phase"] != "ready" {
		t.Fatalf("transcript %v, want ready and then its end", lines)
	}
	s, _ := g.session(t, "codespace-a")
	was, err := s.Lookup(a.Key)
	if err != nil || was.Phase != "run_authorized" || was.Scope == nil {
		t.Fatalf("after the launch = %+v, %v; want run_authorized in its scope", was, err)
	}

	g.kill()
	g.start()
	s, again := g.session(t, "codespace-a")
	now, err := s.Lookup(a.Key)
	switch {
	case err != nil:
		t.Fatalf("after a kill: lookup = %v, want the attempt", err)
	case again != in || now.Owner != in || now.RequestFingerprint != was.RequestFingerprint:
		t.Errorf("after a kill: owner %+v, fingerprint %s; want %+v, %s", now.Owner, now.RequestFingerprint, in, was.RequestFingerprint)
	case now.Phase != "suspect" || now.Scope == nil || *now.Scope != *was.Scope || now.Reservation == nil:
		t.Errorf("after a kill: %s in %+v; want suspect, charged, in its scope %+v", now.Phase, now.Scope, was.Scope)
	}
	if got, want := g.committed(), a.Intent.Requested; uint64(got["cpu_milli"].(float64)) != want.CPUMilli ||
		uint64(got["memory_bytes"].(float64)) != want.MemoryBytes || uint64(got["tasks"].(float64)) != want.Tasks {
		t.Errorf("after a kill: committed %v, want the attempt's %+v once", got, want)
	}
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", h.cmd.Process.Pid)); err != nil || !strings.Contains(string(cg), was.Scope.ScopeID) {
		t.Errorf("the program's cgroup after the kill = %q, %v; want its scope %s", cg, err, was.Scope.ScopeID)
	}

	hosts := g.watch("hosts")
	hold.Close()
	if code := h.wait(t); code != 3 {
		t.Errorf("the program ended %d, want its own 3", code)
	}
	hosts.until(t, "local", "nothing charged", func(o map[string]any) bool {
		return field(o, "status", "admission", "charged") == 0.0
	})
	s, _ = g.session(t, "codespace-a")
	if r, err := s.Lookup(a.Key); err != nil || r.Phase != "released" || r.ReleaseReason == nil || *r.ReleaseReason != "scope_terminated" {
		t.Errorf("after the program's end = %+v, %v; want released scope_terminated", r, err)
	}
}
