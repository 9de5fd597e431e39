//go:build linux

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/scope"
)

// A scope made by hand under the naming contract, with a process moved
// in, is listed as foreign, not launched by marshald, and a Warning names
// it.
func TestHandMadeScopeIsForeign(t *testing.T) {
	d := newDaemon(t)
	d.write("coder.yaml", profileYAML("coder", 500))
	d.start()
	profiles := d.watch("profiles")
	profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })

	name := scope.ScopeName("coder", scope.NewID())
	dir := d.tree.V2("marshal", "marshal.slice", scope.SliceName("coder"), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	proc := exec.Command("sleep", "1000")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { proc.Process.Kill(); proc.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(proc.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	agents := d.watch("agents")
	agents.until(t, name, "seen, not launched by marshald", func(o map[string]any) bool {
		return field(o, "status", "populated") == true && field(o, "status", "launched") == false
	})
	if out := d.mustCtl("get", "agents"); !strings.Contains(out, "foreign") {
		t.Errorf("get agents does not mark the hand-made scope foreign:\n%s", out)
	}
	events := d.watchLines("events", "-w")
	events.until(t, "a Warning naming the scope", func(line string) bool {
		return strings.Contains(line, "ForeignScope") && strings.Contains(line, name)
	})
}
