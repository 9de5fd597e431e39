//go:build linux

package test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func profileYAML(name string, cpu int) string {
	return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata:
  name: %s
spec:
  limits:
    cpu_milli: %d
    tasks: 512
`, name, cpu)
}

func workspaceYAML(name, root, profile string) string {
	return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata:
  name: %s
spec:
  root: %s
  profile: %s
`, name, root, profile)
}

func generationIs(gen float64) func(map[string]any) bool {
	return func(o map[string]any) bool {
		return o != nil && field(o, "metadata", "generation") == gen && field(o, "status", "observedGeneration") == gen
	}
}

// lines follows the output of a watching marshalctl line by line.
type lines struct {
	mu   sync.Mutex
	all  []string
	wake chan struct{}
}

func (d *daemon) watchLines(args ...string) *lines {
	t := d.t
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "marshalctl"), append([]string{"--socket", d.socket}, args...)...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &lines{wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); cmd.Wait(); <-done })
	return l
}

func (l *lines) until(t *testing.T, what string, match func(string) bool) {
	t.Helper()
	testutil.Eventually(t, l.wake, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, s := range l.all {
			if match(s) {
				return true
			}
		}
		return false
	}, what)
}

func TestManifestLifecycle(t *testing.T) {
	d := newDaemon(t)
	root := t.TempDir()
	d.write("coder.yaml", profileYAML("coder", 1000))
	d.write("ws/webapp.yaml", workspaceYAML("webapp", root, "coder"))
	d.write("ws/docs.yaml", workspaceYAML("docs", filepath.Join(root, "missing"), "writer"))
	d.start()
	profiles := d.watch("profiles")
	workspaces := d.watch("workspaces")
	table := d.watchLines("get", "profiles", "-w")

	profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
	workspaces.until(t, "webapp", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
	docs := workspaces.until(t, "docs", "not ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "False") })
	if c := condition(docs, "Ready"); c["reason"] != "RootMissing" && c["reason"] != "ProfileMissing" {
		t.Errorf("docs Ready reason = %v, want RootMissing or ProfileMissing", c["reason"])
	}
	out := d.mustCtl("get", "workspaces")
	if !strings.Contains(out, "webapp") || !strings.Contains(out, "docs") {
		t.Errorf("get workspaces:\n%s", out)
	}

	t.Run("edit", func(t *testing.T) {
		d.write("coder.yaml", profileYAML("coder", 1500))
		o := profiles.until(t, "coder", "at generation 2", generationIs(2))
		if got := field(o, "spec", "limits", "cpu_milli"); got != 1500.0 {
			t.Errorf("cpu_milli = %v, want 1500", got)
		}
	})
	t.Run("break_keeps_the_last_good_version", func(t *testing.T) {
		d.write("coder.yaml", strings.Replace(profileYAML("coder", 2000), "limits:", "limitz:", 1))
		o := profiles.until(t, "coder", "invalid", func(o map[string]any) bool { return conditionIs(o, "Invalid", "True") })
		msg, _ := condition(o, "Invalid")["message"].(string)
		if !strings.Contains(msg, "coder.yaml:6") || !strings.Contains(msg, "spec.limitz") {
			t.Errorf("Invalid message = %q, want file, line and field", msg)
		}
		if got := field(o, "spec", "limits", "cpu_milli"); got != 1500.0 {
			t.Errorf("cpu_milli = %v, want the last good 1500", got)
		}
		if !conditionIs(o, "Ready", "True") {
			t.Error("a typo took the profile out of Ready")
		}
		if out := d.mustCtl("get", "profiles"); !strings.Contains(out, "spec.limitz") {
			t.Errorf("get profiles does not show the error:\n%s", out)
		}
	})
	t.Run("fix", func(t *testing.T) {
		d.write("coder.yaml", profileYAML("coder", 2000))
		profiles.until(t, "coder", "valid at generation 3", func(o map[string]any) bool {
			return generationIs(3)(o) && conditionIs(o, "Invalid", "False")
		})
	})
	t.Run("atomic_rename_over", func(t *testing.T) {
		tmp := filepath.Join(d.config, ".coder.yaml.swp")
		os.WriteFile(tmp, []byte(profileYAML("coder", 700)), 0o644)
		if err := os.Rename(tmp, filepath.Join(d.config, "coder.yaml")); err != nil {
			t.Fatal(err)
		}
		profiles.until(t, "coder", "at generation 4", generationIs(4))
	})
	t.Run("delete", func(t *testing.T) {
		os.Remove(filepath.Join(d.config, "coder.yaml"))
		table.until(t, "coder deleted", func(s string) bool {
			return strings.HasPrefix(s, "coder ") && strings.HasSuffix(s, "(deleted)")
		})
		if r := d.ctl("get", "profiles", "coder"); r.code == 0 {
			t.Errorf("get profiles coder after delete: exit 0\n%s", r.stdout)
		}
		workspaces.until(t, "webapp", "not ready without its profile", func(o map[string]any) bool {
			c := condition(o, "Ready")
			return c != nil && c["status"] == "False" && c["reason"] == "ProfileMissing"
		})
	})
}

func TestSymlinkSwapOfTheConfigDir(t *testing.T) {
	d := newDaemon(t)
	revs := t.TempDir()
	for i, cpu := range []int{100, 200} {
		dir := filepath.Join(revs, fmt.Sprintf("rev%d", i+1))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(profileYAML("coder", cpu)), 0o644)
	}
	os.Remove(d.config)
	if err := os.Symlink(filepath.Join(revs, "rev1"), d.config); err != nil {
		t.Fatal(err)
	}
	d.start()
	profiles := d.watch("profiles")
	profiles.until(t, "coder", "from rev1", func(o map[string]any) bool { return field(o, "spec", "limits", "cpu_milli") == 100.0 })
	tmp := d.config + ".new"
	os.Symlink(filepath.Join(revs, "rev2"), tmp)
	if err := os.Rename(tmp, d.config); err != nil {
		t.Fatal(err)
	}
	profiles.until(t, "coder", "from rev2", func(o map[string]any) bool { return field(o, "spec", "limits", "cpu_milli") == 200.0 })
}

func TestEmptiedConfigDirIsHeld(t *testing.T) {
	d := newDaemon(t)
	d.write("coder.yaml", profileYAML("coder", 100))
	d.start()
	profiles := d.watch("profiles")
	table := d.watchLines("get", "profiles", "-w")
	profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })

	os.Remove(filepath.Join(d.config, "coder.yaml"))
	events := d.watchLines("events", "-w")
	events.until(t, "the hold's warning", func(s string) bool { return strings.Contains(s, "EmptiedHeld") })
	r := d.ctl("get", "profiles")
	if !strings.Contains(r.stdout, "coder") {
		t.Fatalf("the emptied dir deleted coder:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "held") {
		t.Errorf("get profiles does not warn about the hold; stderr:\n%s", r.stderr)
	}
	d.mustCtl("apply", "--allow-empty")
	table.until(t, "coder deleted", func(s string) bool {
		return strings.HasPrefix(s, "coder ") && strings.HasSuffix(s, "(deleted)")
	})
}

func TestRestartKeepsState(t *testing.T) {
	d := newDaemon(t)
	d.write("coder.yaml", profileYAML("coder", 100))
	d.start()
	profiles := d.watch("profiles")
	profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
	d.write("coder.yaml", profileYAML("coder", 300))
	profiles.until(t, "coder", "at generation 2", generationIs(2))
	before := d.mustCtl("get", "profiles", "coder", "-o", "json")
	d.stop()

	// Broken while marshald is down: the restart keeps the last good
	// version and says why it is not the file's.
	d.write("coder.yaml", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder}\nspec: [\n")
	d.start()
	profiles = d.watch("profiles")
	o := profiles.until(t, "coder", "invalid after restart", func(o map[string]any) bool { return conditionIs(o, "Invalid", "True") })
	if field(o, "metadata", "generation") != 2.0 || field(o, "spec", "limits", "cpu_milli") != 300.0 {
		t.Errorf("after restart coder = %v, want generation 2 with cpu 300 as before:\n%s", o, before)
	}
	if field(o, "metadata", "creationTimestamp") == nil {
		t.Error("creationTimestamp lost")
	}
}

func TestSocketRefusesAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	d := newDaemon(t)
	d.start()
	os.Chmod(bin, 0o755)
	cmd := exec.Command(filepath.Join(bin, "marshalctl"), "--socket", d.socket, "get", "profiles")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("uid 65534 was served:\n%s", out)
	}
	if !strings.Contains(string(out), "permission denied") && !strings.Contains(string(out), "FORBIDDEN") {
		t.Errorf("refusal does not say why:\n%s", out)
	}
}

func TestStoppingLeavesAgentsRunning(t *testing.T) {
	d := newDaemon(t)
	d.write("coder.yaml", profileYAML("coder", 500))
	d.start()
	profiles := d.watch("profiles")
	profiles.until(t, "coder", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })

	name, dir, agent := d.startAgent("coder")
	d.watch("agents").until(t, name, "seen", func(o map[string]any) bool { return field(o, "status", "populated") == true })

	d.stop()
	if err := agent.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the agent died with marshald: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the agent's scope went with marshald: %v", err)
	}
	d.start()
	d.watch("agents").until(t, name, "seen again after restart", func(o map[string]any) bool {
		return field(o, "status", "populated") == true && field(o, "status", "profile") == "coder"
	})
}

// startAgent starts an agent of profile as a launch leaves it: a process
// in its scope, killed when the test ends. It returns the scope's name
// and directory.
func (d *daemon) startAgent(profile string) (name, dir string, agent *exec.Cmd) {
	t := d.t
	t.Helper()
	name = scope.ScopeName(profile, scope.NewID())
	dir = d.tree.V2("marshal", "marshal.slice", scope.SliceName(profile), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	agent = exec.Command("sleep", "1000")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(agent.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return name, dir, agent
}
