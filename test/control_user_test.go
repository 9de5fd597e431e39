//go:build linux

package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// nobody is the ordinary user the tests run agents as.
const nobody = 65534

// asUser runs cmd as uid, in group uid and no other, as a login of that
// user would.
func asUser(uid int) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
}

// ctlAs runs marshalctl with args against d as uid.
func (d *daemon) ctlAs(uid int, args ...string) result {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "marshalctl"), append([]string{"--socket", d.socket}, args...)...)
	asUser(uid)(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		d.t.Fatalf("marshalctl %s as uid %d did not finish within %v", strings.Join(args, " "), uid, testutil.Deadline)
	}
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		d.t.Fatalf("marshalctl %v as uid %d: %v", args, uid, err)
	}
	return r
}

// giveTo lets uid reach d's socket and the binaries, and makes owned
// (workspace roots, output directories) uid's own: the test's
// directories are root's, 0700.
func giveTo(t *testing.T, d *daemon, uid int, owned ...string) {
	t.Helper()
	home := filepath.Dir(filepath.Dir(d.socket))
	for _, dir := range []string{bin, home, filepath.Dir(home)} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range owned {
		if err := os.Chown(dir, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// An agent of an ordinary user is governed as an agent, not as its
// user. marshald serves root and, with --allow-group, the members of one
// group (without it the user reaches nothing: TestSocketRefusesAnotherUser);
// from inside an agent that nobody, a member, ran: reads work, a run
// into another workspace starts nothing, and apply and kill (of nobody's
// own other agent) are refused and change nothing. nobody outside any
// agent keeps every right marshald gives it.
func TestOrdinaryUsersAgentCannotGovern(t *testing.T) {
	testutil.RequireRoot(t)
	root, out := t.TempDir(), t.TempDir()
	d := newDaemon(t)
	d.write("all.yaml", controlManifests(root))
	d.start("--allow-group", strconv.Itoa(nobody))
	d.waitReady("webapp", "other", "leadws")
	giveTo(t, d, nobody, root, out)

	victim, victimScope := d.startVictim(root, "other", asUser(nobody))
	intruder := filepath.Join(out, "intruder.yaml")
	if err := os.WriteFile(intruder, []byte(fmt.Sprintf("apiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: intruder}\nspec:\n  root: %s\n  profile: coder\n", root)), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "id -u > " + filepath.Join(out, "uid") + "\n" + controlScript(out,
		"get get workspaces",
		"describe describe workspace other",
		"runother run -w other -- touch "+filepath.Join(out, "other-ran"),
		"apply apply -f "+intruder,
		"kill kill agent "+victimScope+" --wait=false",
	)
	cmd := d.runCmd("-w", "webapp", "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, "MARSHAL_SOCKET="+d.socket)
	asUser(nobody)(cmd)
	a := d.startCmd(cmd)
	a.stdin.Close()
	if code := a.wait(t); code != 0 {
		_, stderr := a.output()
		t.Fatalf("the agent's script: exit %d\n%s", code, stderr)
	}
	if uid, err := os.ReadFile(filepath.Join(out, "uid")); err != nil || strings.TrimSpace(string(uid)) != strconv.Itoa(nobody) {
		t.Fatalf("the agent ran as uid %q (%v), want %d", uid, err, nobody)
	}
	self, err := os.ReadFile(filepath.Join(out, "self"))
	if err != nil {
		t.Fatal(err)
	}
	agentScope := scopeInCgroup.FindString(string(self))
	if !strings.HasPrefix(agentScope, "marshal-coder-") {
		t.Fatalf("the agent's cgroup names no scope of coder:\n%s", self)
	}
	got := answers(t, out, "get", "describe", "runother", "apply", "kill")

	for _, tc := range []struct {
		ask string
		// code is marshalctl's exit status; refused, when set, the grant
		// the refusal must name.
		code    int
		refused string
		// changed says what the request changed, "" when nothing.
		changed func() string
	}{
		{ask: "get"},
		{ask: "describe"},
		{ask: "runother", code: 77, refused: `spec.control.run to name "other"`, changed: func() string {
			if _, err := os.Stat(filepath.Join(out, "other-ran")); err == nil {
				return "its command ran"
			}
			return ""
		}},
		{ask: "apply", code: 3, refused: `spec.control.allow to hold "apply"`, changed: func() string {
			if r := d.ctl("get", "workspace", "intruder"); r.code == 0 {
				return "workspace intruder is declared"
			}
			return ""
		}},
		{ask: "kill", code: 3, refused: `spec.control.allow to hold "stop"`, changed: func() string {
			select {
			case <-victim.done:
				return "the other agent ended"
			default:
				return ""
			}
		}},
	} {
		t.Run(tc.ask, func(t *testing.T) {
			a := got[tc.ask]
			if a.code != tc.code {
				t.Errorf("exit %d, want %d\n%s", a.code, tc.code, a.out)
			}
			if strings.Contains(a.out, "may not use this marshald") {
				t.Errorf("refused as a uid the socket does not serve, not as an agent:\n%s", a.out)
			}
			if tc.refused == "" {
				if strings.Contains(a.out, "FORBIDDEN") || strings.Contains(a.out, "refused") {
					t.Errorf("a read was refused:\n%s", a.out)
				}
				return
			}
			if !strings.Contains(a.out, "an agent's request") || !strings.Contains(a.out, agentScope) || !strings.Contains(a.out, tc.refused) {
				t.Errorf("the refusal does not name the agent %s and %s:\n%s", agentScope, tc.refused, a.out)
			}
			if c := tc.changed(); c != "" {
				t.Errorf("refused, yet %s", c)
			}
		})
	}
	if events := d.mustCtl("events", "--for", "workspace/webapp"); !strings.Contains(events, "ControlRefused") || !strings.Contains(events, agentScope) {
		t.Errorf("no ControlRefused event on workspace webapp naming %s:\n%s", agentScope, events)
	}

	// nobody, outside any agent, keeps what the group gives it.
	if r := d.ctlAs(nobody, "apply", "-f", intruder); r.code != 0 {
		t.Errorf("nobody's apply outside any agent: exit %d\n%s", r.code, r.stderr)
	}
	if r := d.ctlAs(nobody, "kill", "agent", victimScope); r.code != 0 {
		t.Errorf("nobody's kill outside any agent: exit %d\n%s", r.code, r.stderr)
	}
	if sig := endedBy(t, victim); sig != syscall.SIGKILL {
		t.Errorf("nobody's other agent ended by %v, want SIGKILL", sig)
	}
}
