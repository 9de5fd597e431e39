//go:build linux

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/scope"
)

// handMadeScope makes scope marshal-<profile>-<id>.scope by hand in
// marshald's tree, as anyone who can write the tree could, and moves a
// sleeping process into it; it returns the scope's name and the pid.
func (d *daemon) handMadeScope(profile, id string) (string, int) {
	t := d.t
	t.Helper()
	name := scope.ScopeName(profile, id)
	dir := d.tree.V2("marshal", "marshal.slice", scope.SliceName(profile), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	proc := exec.Command("sleep", "1000")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(proc.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return name, proc.Process.Pid
}

// A scope made by hand under the naming contract, with a process moved
// in, is listed as foreign, not launched by marshald, identify says so of
// its process, and a Warning names it.
func TestHandMadeScopeIsForeign(t *testing.T) {
	d := newDaemon(t)
	d.write("coder.yaml", profileYAML("coder", 500))
	d.start()
	profiles := d.watch("profiles")
	profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })

	name, pid := d.handMadeScope("coder", scope.NewID())
	agents := d.watch("agents")
	agents.until(t, name, "seen, not launched by marshald", func(o map[string]any) bool {
		return field(o, "status", "populated") == true && field(o, "status", "launched") == false
	})
	if out := d.mustCtl("get", "agents"); !strings.Contains(out, "foreign") {
		t.Errorf("get agents does not mark the hand-made scope foreign:\n%s", out)
	}
	if out := d.mustCtl("identify", strconv.Itoa(pid)); !strings.Contains(out, "foreign: marshald did not launch this scope") {
		t.Errorf("identify does not say the hand-made scope is foreign:\n%s", out)
	}
	events := d.watchLines("events", "-w")
	events.until(t, "a Warning naming the scope", func(line string) bool {
		return strings.Contains(line, "ForeignScope") && strings.Contains(line, name)
	})
}

// A hand-made scope that borrows the ID of a live launch, named for
// another profile, gains nothing: it is foreign and of no workspace,
// while the launch's own scope stays the workspace's agent.
func TestScopeBorrowingALaunchIDIsForeign(t *testing.T) {
	root := t.TempDir()
	// The permissive profile is declared, so that its slice is marshald's.
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "none", maxLive: 1})+
		"---\n"+profileYAML("permissive", 500), "web")
	d.watch("profiles").until(t, "permissive", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
	a := d.startRun(append([]string{"-w", "web"}, blockingAgent...)...)
	waitFiles(t, root, "m-", 1)
	marks, err := filepath.Glob(filepath.Join(root, "m-*"))
	if err != nil || len(marks) != 1 {
		t.Fatalf("marks %v, %v; want the agent's one", marks, err)
	}
	agentPID, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(marks[0]), "m-"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := identity.Resolve(agentPID)
	if err != nil {
		t.Fatal(err)
	}
	agents := d.watch("agents")
	agents.until(t, own.Scope, "the launch's, of workspace web", func(o map[string]any) bool {
		return field(o, "status", "launched") == true && field(o, "status", "workspace") == "web"
	})

	name, pid := d.handMadeScope("permissive", own.ID)
	agents.until(t, name, "seen, foreign and of no workspace", func(o map[string]any) bool {
		return field(o, "status", "populated") == true && field(o, "status", "launched") == false &&
			field(o, "status", "workspace") == nil
	})
	if out := d.mustCtl("identify", strconv.Itoa(pid)); !strings.Contains(out, "foreign") || strings.Contains(out, "workspace web") {
		t.Errorf("identify of the borrowing scope's process = %q, want foreign and no workspace", out)
	}
	agents.until(t, own.Scope, "still the workspace's", func(o map[string]any) bool {
		return field(o, "status", "launched") == true && field(o, "status", "workspace") == "web"
	})
	a.stdin.Close()
	if code := a.wait(t); code != 0 {
		t.Errorf("agent exited %d, want 0", code)
	}
}
