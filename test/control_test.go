//go:build linux

package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/scope"
)

// controlManifests declares profile coder, which grants nothing, and
// profile lead, which grants runs into workspace other and stop; the
// workspaces webapp and other are coder's, leadws is lead's. All are
// rooted at root and take no reservation.
func controlManifests(root string) string {
	var b strings.Builder
	b.WriteString("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder}\nspec: {}\n")
	b.WriteString("---\napiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: lead}\nspec:\n  control: {run: [other], allow: [stop]}\n")
	for _, w := range [][2]string{{"webapp", "coder"}, {"other", "coder"}, {"leadws", "lead"}} {
		fmt.Fprintf(&b, "---\napiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: %s}\nspec:\n  root: %s\n  profile: %s\n  resources: {participation: none}\n", w[0], root, w[1])
	}
	return b.String()
}

// controlScript is a shell script that runs each of asks, "NAME ARGS…",
// as marshalctl ARGS… and leaves its output in out/NAME.out and its exit
// status in out/NAME.rc; it first leaves its own cgroup in out/self.
func controlScript(out string, asks ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "o=%s\ncat /proc/self/cgroup > \"$o/self\"\n", out)
	b.WriteString("m() { n=$1; shift; marshalctl \"$@\" > \"$o/$n.out\" 2>&1 < /dev/null; echo $? > \"$o/$n.rc\"; }\n")
	for _, a := range asks {
		b.WriteString("m " + a + "\n")
	}
	return b.String()
}

// asked is what one marshalctl of a controlScript printed and exited
// with.
type asked struct {
	out  string
	code int
}

// answers reads what controlScript left in out.
func answers(t *testing.T, out string, names ...string) map[string]asked {
	t.Helper()
	got := make(map[string]asked, len(names))
	for _, n := range names {
		o, err := os.ReadFile(filepath.Join(out, n+".out"))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		rc, err := os.ReadFile(filepath.Join(out, n+".rc"))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		code, err := strconv.Atoi(strings.TrimSpace(string(rc)))
		if err != nil {
			t.Fatalf("%s: exit status %q", n, rc)
		}
		got[n] = asked{out: string(o), code: code}
	}
	return got
}

// inAgent runs script with sh inside a new agent of workspace, with
// marshalctl on PATH and pointed at d, and returns the run's result.
func (d *daemon) inAgent(workspace, script string) result {
	d.t.Helper()
	cmd := d.runCmd("-w", workspace, "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, "MARSHAL_SOCKET="+d.socket)
	a := d.startCmd(cmd)
	a.stdin.Close()
	code := a.wait(d.t)
	stdout, stderr := a.output()
	return result{stdout: stdout, stderr: stderr, code: code}
}

// startVictim starts an agent in workspace that sleeps, its marshalctl
// run changed by each of opts first, and returns it and its scope.
func (d *daemon) startVictim(root, workspace string, opts ...func(*exec.Cmd)) (*agent, string) {
	t := d.t
	t.Helper()
	before := d.scopeDirs()
	cmd := d.runCmd("-w", workspace, "--", "sh", "-c", "touch m-$$; exec sleep 600")
	for _, o := range opts {
		o(cmd)
	}
	a := d.startCmd(cmd)
	if !a.startedOrEnded(t, root) {
		_, stderr := a.output()
		t.Fatalf("the agent did not start: %s", stderr)
	}
	for _, s := range d.scopeDirs() {
		if !strings.Contains(strings.Join(before, " "), s) {
			return a, s
		}
	}
	t.Fatalf("no new scope for the agent: %q", d.scopeDirs())
	return nil, ""
}

var scopeInCgroup = regexp.MustCompile(`marshal-[a-z]+-[0-9a-f]{32}\.scope`)

// An agent of a profile that grants nothing may read and run into its
// own workspace, in a new scope of its profile; a run into another
// workspace starts nothing, and apply, delete, stop, kill and admin are
// refused FORBIDDEN, naming its scope and the missing grant, change
// nothing, and are recorded as ControlRefused events and in metrics. The
// user outside any agent keeps every right.
func TestAgentCannotGovern(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	d := startLaunchDaemon(t, controlManifests(root), "webapp", "other", "leadws")
	victim, victimScope := d.startVictim(root, "other")
	intruder := filepath.Join(out, "intruder.yaml")
	if err := os.WriteFile(intruder, []byte(fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: intruder}\nspec:\n  root: %s\n  profile: coder\n", root)), 0o644); err != nil {
		t.Fatal(err)
	}
	script := controlScript(out,
		"get get workspaces",
		"describe describe workspace other",
		"events events",
		"identify identify $$",
		"version version",
		"explain run --explain -w other -- true",
		"egress egress log",
		"dryrun apply --dry-run -f "+intruder,
		"runother run -w other -- touch "+filepath.Join(out, "other-ran"),
		"apply apply -f "+intruder,
		"delete delete workspace other --wait=false",
		"stop stop agent "+victimScope+" --grace 1s --wait=false",
		"kill kill agent "+victimScope+" --wait=false",
		"backup admin backup "+filepath.Join(out, "journal"),
		"own run -w webapp -- cat /proc/self/cgroup",
	)
	if r := d.inAgent("webapp", script); r.code != 0 {
		t.Fatalf("the agent's script: exit %d\n%s", r.code, r.stderr)
	}
	self, err := os.ReadFile(filepath.Join(out, "self"))
	if err != nil {
		t.Fatal(err)
	}
	agentScope := scopeInCgroup.FindString(string(self))
	if !strings.HasPrefix(agentScope, "marshal-coder-") {
		t.Fatalf("the agent's cgroup names no scope of coder:\n%s", self)
	}
	got := answers(t, out, "get", "describe", "events", "identify", "version", "explain", "egress", "dryrun",
		"runother", "apply", "delete", "stop", "kill", "backup", "own")

	for _, n := range []string{"get", "describe", "events", "identify", "version", "explain", "dryrun"} {
		if a := got[n]; a.code != 0 || strings.Contains(a.out, "FORBIDDEN") || strings.Contains(a.out, "refused") {
			t.Errorf("%s from inside an agent: exit %d\n%s", n, a.code, a.out)
		}
	}
	if a := got["egress"]; strings.Contains(a.out, "refused") {
		t.Errorf("egress log from inside an agent was refused: exit %d\n%s", a.code, a.out)
	}
	if a := got["runother"]; a.code != 77 || !strings.Contains(a.out, "FORBIDDEN: an agent's request") ||
		!strings.Contains(a.out, agentScope) || !strings.Contains(a.out, `spec.control.run to name "other"`) || !strings.Contains(a.out, "nothing was started") {
		t.Errorf("run into another workspace: exit %d, want 77 FORBIDDEN naming %s and the grant\n%s", a.code, agentScope, a.out)
	}
	if _, err := os.Stat(filepath.Join(out, "other-ran")); err == nil {
		t.Error("the refused run into another workspace ran its command")
	}
	for n, grant := range map[string]string{"apply": `"apply"`, "delete": `"delete"`, "stop": `"stop"`, "kill": `"stop"`, "backup": `"admin"`} {
		a := got[n]
		if a.code != 3 || !strings.Contains(a.out, "an agent's request was refused") || !strings.Contains(a.out, agentScope) ||
			!strings.Contains(a.out, "spec.control.allow to hold "+grant) {
			t.Errorf("%s from inside an agent: exit %d, want 3, refused naming %s and %s\n%s", n, a.code, agentScope, grant, a.out)
		}
	}
	if r := d.ctl("get", "workspace", "intruder"); r.code == 0 {
		t.Errorf("the refused apply declared workspace intruder:\n%s", r.stdout)
	}
	if r := d.ctl("get", "workspace", "other"); r.code != 0 {
		t.Errorf("the refused delete removed workspace other: %s", r.stderr)
	}
	select {
	case <-victim.done:
		t.Error("the refused stop or kill ended the other agent")
	default:
	}
	if _, err := os.Stat(filepath.Join(out, "journal")); err == nil {
		t.Error("the refused backup wrote the journal")
	}
	own := got["own"]
	ownScope := scopeInCgroup.FindString(own.out)
	if own.code != 0 || !strings.HasPrefix(ownScope, "marshal-coder-") || ownScope == agentScope {
		t.Errorf("run into its own workspace: exit %d, scope %q; want a new scope of coder, not %s\n%s", own.code, ownScope, agentScope, own.out)
	}

	events := d.mustCtl("events", "--for", "workspace/webapp")
	if !strings.Contains(events, "ControlRefused") || !strings.Contains(events, agentScope) {
		t.Errorf("no ControlRefused event on workspace webapp naming %s:\n%s", agentScope, events)
	}
	for _, action := range []string{"run", "apply", "delete", "stop", "admin"} {
		series := `marshal_control_requests_total{action="` + action + `",caller="agent",surface="api",verdict="refused"}`
		if v := d.metric(series); v < 1 {
			t.Errorf("%s = %v, want at least 1", series, v)
		}
	}

	// The user, outside any agent, keeps every right.
	if r := d.ctl("apply", "-f", intruder); r.code != 0 {
		t.Errorf("the user's apply: exit %d\n%s", r.code, r.stderr)
	}
	if r := d.ctl("kill", "agent", victimScope); r.code != 0 {
		t.Errorf("the user's kill: exit %d\n%s", r.code, r.stderr)
	}
	victim.wait(t)
}

// A grant allows exactly what it names: an agent of profile lead may run
// into workspace other, landing in a scope of other's profile, and stop
// another agent, but not run into a workspace it does not name, nor
// apply or delete.
func TestAgentGrantAllowsWhatItNames(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	d := startLaunchDaemon(t, controlManifests(root), "webapp", "other", "leadws")
	victim, victimScope := d.startVictim(root, "webapp")
	script := controlScript(out,
		"runother run -w other -- cat /proc/self/cgroup",
		"runwebapp run -w webapp -- touch "+filepath.Join(out, "webapp-ran"),
		"delete delete workspace webapp --wait=false",
		"stop kill agent "+victimScope,
	)
	if r := d.inAgent("leadws", script); r.code != 0 {
		t.Fatalf("the agent's script: exit %d\n%s", r.code, r.stderr)
	}
	got := answers(t, out, "runother", "runwebapp", "delete", "stop")
	if a := got["runother"]; a.code != 0 || !strings.HasPrefix(scopeInCgroup.FindString(a.out), "marshal-coder-") {
		t.Errorf("granted run into other: exit %d, want a scope of coder\n%s", a.code, a.out)
	}
	if a := got["runwebapp"]; a.code != 77 || !strings.Contains(a.out, `spec.control.run to name "webapp"`) {
		t.Errorf("run into a workspace the grant does not name: exit %d\n%s", a.code, a.out)
	}
	if _, err := os.Stat(filepath.Join(out, "webapp-ran")); err == nil {
		t.Error("the refused run ran its command")
	}
	if a := got["delete"]; a.code != 3 || !strings.Contains(a.out, `spec.control.allow to hold "delete"`) {
		t.Errorf("delete, not granted: exit %d\n%s", a.code, a.out)
	}
	if a := got["stop"]; a.code != 0 {
		t.Errorf("kill, granted as stop: exit %d\n%s", a.code, a.out)
	}
	if sig := endedBy(t, victim); sig != syscall.SIGKILL {
		t.Errorf("the other agent ended by %v, want SIGKILL", sig)
	}
}

// A process in a scope made by hand, which marshald did not launch, is
// no user: it may read, and is refused a run, even into the workspace of
// the profile its scope is named for, and every change.
func TestHandMadeScopeGetsNoMoreThanAnAgent(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	d := startLaunchDaemon(t, controlManifests(root), "webapp")
	name := scope.ScopeName("coder", scope.NewID())
	dir := d.tree.V2("marshal", "marshal.slice", scope.SliceName("coder"), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "read go\n" + controlScript(out,
		"get get workspaces",
		"run run -w webapp -- touch "+filepath.Join(out, "ran"),
		"delete delete workspace webapp --wait=false",
	)
	sh := exec.Command("sh", "-c", script)
	sh.Env = agentEnv("MARSHAL_SOCKET=" + d.socket)
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sh.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	// The shell reads its line only once it is in the scope.
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := sh.Wait(); err != nil {
		t.Fatalf("the script: %v", err)
	}
	got := answers(t, out, "get", "run", "delete")
	if a := got["get"]; a.code != 0 {
		t.Errorf("get from a hand-made scope: exit %d\n%s", a.code, a.out)
	}
	if a := got["run"]; a.code != 77 || !strings.Contains(a.out, "a scope marshald did not launch") || !strings.Contains(a.out, name) {
		t.Errorf("run from a hand-made scope: exit %d, want 77 naming %s\n%s", a.code, name, a.out)
	}
	if _, err := os.Stat(filepath.Join(out, "ran")); err == nil {
		t.Error("the refused run ran its command")
	}
	if a := got["delete"]; a.code != 3 || !strings.Contains(a.out, "most restricted agent") {
		t.Errorf("delete from a hand-made scope: exit %d\n%s", a.code, a.out)
	}
	if r := d.ctl("get", "workspace", "webapp"); r.code != 0 {
		t.Errorf("the refused delete removed workspace webapp: %s", r.stderr)
	}
}

// A consumer's secret presented on the DevGuard socket from inside an
// agent is refused unless the agent's profile names that consumer in
// spec.control.consumers; a grant lets exactly that consumer in. The
// refusal is a ControlRefused event on the agent's Workspace.
func TestDevGuardConsumerSecretFromInsideAnAgent(t *testing.T) {
	root := t.TempDir()
	g := startDevGuardWith(t, func(m string) string {
		m += "\n---\napiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: gateway}\nspec:\n  control: {consumers: [codespace]}\n"
		for _, w := range [][2]string{{"desk", "interactive"}, {"gatedesk", "gateway"}} {
			m += fmt.Sprintf("---\napiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: %s}\nspec:\n  root: %s\n  profile: %s\n  resources: {participation: none}\n", w[0], root, w[1])
		}
		return m
	})
	g.waitReady("desk", "gatedesk")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	register := func(workspace, instance string) result {
		return g.runNow("-w", workspace, "--", "env", childRoleEnv+"=register", self, g.sock, "codespace", "g1", codespaceSecret, instance)
	}
	if r := register("desk", "inside-a"); r.code != 0 || strings.TrimSpace(r.stdout) != "unauthorized" {
		t.Errorf("codespace's secret from inside an agent of a profile that grants nothing: %+v, want unauthorized", r)
	}
	if r := register("gatedesk", "inside-b"); r.code != 0 || strings.TrimSpace(r.stdout) != "ok" {
		t.Errorf("codespace's secret from inside an agent whose profile names it: %+v, want ok", r)
	}
	if out := child(t, "register", g.sock, "codespace", "g1", codespaceSecret, "outside"); out != "ok" {
		t.Errorf("codespace's secret from outside any agent: %q, want ok", out)
	}
	if events := g.mustCtl("events", "--for", "workspace/desk"); !strings.Contains(events, "ControlRefused") || !strings.Contains(events, `"codespace"`) {
		t.Errorf("no ControlRefused event on workspace desk naming the consumer:\n%s", events)
	}
	series := `marshal_control_requests_total{action="consumer",caller="agent",surface="devguard",verdict="refused"}`
	if v := g.metric(series); v != 1 {
		t.Errorf("%s = %v, want 1", series, v)
	}
}
