//go:build linux

package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// confineManifests declare profile confined (spec.filesystem, its rule
// on the workspace's secret/ as given) and its workspace ws, and profile
// open (no filesystem) and its workspace plain, on the same root.
const confineManifests = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: confined}
spec:
  filesystem:
    rules:
      - {access: %[2]s, paths: ["{workspace}/secret"]}
---
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: open}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: ws}
spec: {root: %[1]s, profile: confined}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: plain}
spec: {root: %[1]s, profile: open}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: sealed}
spec: {root: %[1]s, profile: open, network: {policy: none}}
`

type confineEnv struct {
	*daemon
	root, outside string
}

func newConfineEnv(t *testing.T, env ...string) *confineEnv {
	t.Helper()
	return startConfineEnv(t, nil, env...)
}

// startConfineEnv is newConfineEnv whose marshald and marshalctl start
// through spawn, when it is not nil.
func startConfineEnv(t *testing.T, spawn func(func() error) error, env ...string) *confineEnv {
	t.Helper()
	testutil.RequireRoot(t)
	if out, err := exec.Command(filepath.Join(bin, "marshal-confine"), "check", "--fs").CombinedOutput(); err != nil {
		t.Skipf("filesystem confinement is not available here: %s", bytes.TrimSpace(out))
	}
	e := &confineEnv{daemon: newDaemon(t), root: t.TempDir(), outside: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(e.root, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.root, "secret", "key"), []byte("KEY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env, e.spawn = env, spawn
	e.write("all.yaml", fmt.Sprintf(confineManifests, e.root, "none"))
	e.start()
	e.waitReady("ws", "plain", "sealed")
	return e
}

// probe is what an agent tries: each line says whether it could.
func (e *confineEnv) probe() string {
	return strings.Join([]string{
		"echo x > " + e.root + "/new-$$ && echo workspace-written || echo workspace-refused",
		"echo x > " + e.outside + "/f 2>/dev/null && echo outside-written || echo outside-refused",
		"cat " + e.root + "/secret/key 2>/dev/null || echo secret-hidden",
		"cat " + e.config + "/all.yaml >/dev/null 2>&1 && echo config-read || echo config-hidden",
		"cat " + e.state + "/* >/dev/null 2>&1 && echo state-read || echo state-hidden",
		"marshalctl --socket " + e.socket + " get profiles >/dev/null 2>&1 && echo api-reached || echo api-unreachable",
		`echo t > "$TMPDIR/x" && echo "tmp-written $TMPDIR" || echo tmp-refused`,
	}, "; ")
}

func wants(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("the agent said:\n%s\nwant %q", out, w)
		}
	}
}

// Through marshald: a profile with filesystem gets the workspace and
// {tmp} writable, writes elsewhere refused, its none path hidden, and
// marshald's config dir, state dir and API socket out of reach; {tmp}
// is removed once the launch is settled. A profile without filesystem
// is unchanged. An edit of the rules applies to the next launch. doctor
// says the profile gets its rules here.
func TestConfinementThroughMarshald(t *testing.T) {
	e := newConfineEnv(t)
	if doctor := e.ctl("doctor"); !strings.Contains(doctor.stdout, "✔ filesystem confinement: profile confined: its ") ||
		!strings.Contains(doctor.stdout, "rules (default read) are given: Landlock ABI ") {
		t.Errorf("doctor:\n%s\nwant profile confined's rules said given", doctor.stdout)
	}
	r := e.runNow("-w", "ws", "--", "sh", "-c", e.probe())
	if r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	wants(t, r.stdout, "workspace-written", "outside-refused", "secret-hidden", "config-hidden", "state-hidden", "api-unreachable")
	tmp := ""
	for line := range strings.Lines(r.stdout) {
		if rest, ok := strings.CutPrefix(line, "tmp-written "); ok {
			tmp = strings.TrimSpace(rest)
		}
	}
	if tmp == "" || !strings.Contains(tmp, "marshal-tmp-") {
		t.Errorf("the agent said:\n%s\nwant {tmp} written", r.stdout)
	}
	e.waitSettled(t)
	if _, err := os.Stat(tmp); err == nil {
		t.Errorf("{tmp} %s is left after the launch settled", tmp)
	}

	r = e.runNow("-w", "plain", "--", "sh", "-c", e.probe())
	wants(t, r.stdout, "workspace-written", "outside-written", "KEY", "config-read", "api-reached")
	if strings.Contains(r.stdout, "marshal-tmp-") {
		t.Errorf("a profile without filesystem got a {tmp}:\n%s", r.stdout)
	}

	profiles := e.watch("profiles")
	e.write("all.yaml", fmt.Sprintf(confineManifests, e.root, "read"))
	profiles.until(t, "confined", "observed generation 2", func(o map[string]any) bool {
		return field(o, "status", "observedGeneration") == float64(2)
	})
	r = e.runNow("-w", "ws", "--", "sh", "-c", e.probe())
	wants(t, r.stdout, "KEY", "outside-refused")
	e.waitSettled(t)
}

// The host's services are out of an isolated agent's reach. In a mount
// namespace of the test's own, /run/user/0 (root's runtime directory:
// the test's marshalctl runs as root) holds the user's service manager
// (systemd/private) and a keyring. An agent in a network namespace
// without filesystem rules finds the manager hidden and the keyring
// there; one under filesystem rules finds the whole runtime directory
// hidden; one of a profile with neither finds both.
func TestHostServicesOutOfReachThroughMarshald(t *testing.T) {
	testutil.RequireRoot(t)
	runtime := "/run/user/0"
	ns := newThreadNamespace(t, "a mount namespace with a runtime directory of its own", func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return err
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", "/run/user", "tmpfs", 0, "mode=0755"); err != nil {
			return err
		}
		if err := os.MkdirAll(runtime+"/systemd", 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(runtime+"/systemd/private", []byte("MANAGER\n"), 0o600); err != nil {
			return err
		}
		return os.WriteFile(runtime+"/keyring", []byte("KEYRING\n"), 0o600)
	})
	e := startConfineEnv(t, ns.do)
	probe := "cat " + runtime + "/systemd/private 2>/dev/null || echo manager-hidden; cat " + runtime + "/keyring 2>/dev/null || echo keyring-hidden"
	for ws, want := range map[string][]string{
		"plain":  {"MANAGER", "KEYRING"},
		"sealed": {"manager-hidden", "KEYRING"},
		"ws":     {"manager-hidden", "keyring-hidden"},
	} {
		r := e.runNow("-w", ws, "--", "sh", "-c", probe)
		if r.code != 0 {
			t.Fatalf("run -w %s: %+v", ws, r)
		}
		if got := strings.Fields(r.stdout); !slices.Equal(got, want) {
			t.Errorf("an agent of workspace %s said %q, want %q", ws, got, want)
		}
	}
}

// A host that cannot give the rules (simulated: Landlock ABI 1) refuses
// a launch of the confined profile with ISOLATION_UNSUPPORTED before
// anything starts, and doctor says so for that profile; the profile
// without filesystem still runs.
func TestConfinementRefusedWhereTheHostCannot(t *testing.T) {
	e := newConfineEnv(t, "MARSHAL_LANDLOCK_ABI_MAX=1")
	r := e.runNow("-w", "ws", "--", "sh", "-c", "echo ran > "+e.outside+"/ran")
	want := "filesystem confinement unavailable: Landlock ABI 2 or later is needed, this host gives 1"
	if r.code != 78 || !strings.Contains(r.stderr, "ISOLATION_UNSUPPORTED") || !strings.Contains(r.stderr, want) ||
		!strings.Contains(r.stderr, "nothing was started") {
		t.Errorf("run: exit %d, stderr %q; want 78 ISOLATION_UNSUPPORTED %q", r.code, r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(e.outside, "ran")); err == nil {
		t.Errorf("the command ran")
	}
	if left := e.scopeDirs(); len(left) != 0 {
		t.Errorf("scopes made for a refused launch: %q", left)
	}
	doctor := e.ctl("doctor")
	if !strings.Contains(doctor.stdout, "filesystem confinement") || !strings.Contains(doctor.stdout, "confined") {
		t.Errorf("doctor:\n%s\nwant the filesystem confinement check naming profile confined", doctor.stdout)
	}
	if !strings.Contains(doctor.stdout, "✘ filesystem confinement: profile confined: its ") ||
		!strings.Contains(doctor.stdout, "cannot be given here, its launches are refused with ISOLATION_UNSUPPORTED: "+want) {
		t.Errorf("doctor:\n%s\nwant profile confined's rules said refused, and why", doctor.stdout)
	}
	if strings.Contains(doctor.stdout, "profile open") {
		t.Errorf("doctor:\n%s\nwant no filesystem line for profile open, which declares none", doctor.stdout)
	}
	r = e.runNow("-w", "plain", "--", "true")
	if r.code != 0 {
		t.Errorf("the profile without filesystem: %+v", r)
	}
}

// An edit of the rules applies to the launches after it, and never to an
// agent already running: it keeps the rules it started with, for itself
// and for the children it starts after the edit, whether the edit
// widens them (none to read) or narrows them again.
func TestConfinementEditLeavesRunningAgentsTheirRules(t *testing.T) {
	e := newConfineEnv(t)
	profiles := e.watch("profiles")
	edit := func(access string, generation float64) {
		t.Helper()
		e.write("all.yaml", fmt.Sprintf(confineManifests, e.root, access))
		profiles.until(t, "confined", fmt.Sprintf("observed generation %v", generation), func(o map[string]any) bool {
			return field(o, "status", "observedGeneration") == generation
		})
	}
	// Each agent reads the secret, says it started (the workspace is
	// where it may write), waits for its stdin to close, then reads it
	// again, itself and through a child started only then.
	blocking := func(name string) *agent {
		t.Helper()
		key := e.root + "/secret/key"
		a := e.startRun("-w", "ws", "--", "sh", "-c", strings.Join([]string{
			"cat " + key + " 2>/dev/null || echo hidden-at-start",
			"touch " + e.root + "/started-" + name,
			"read _",
			"cat " + key + " 2>/dev/null || echo hidden-after-edit",
			"sh -c 'cat " + key + " 2>/dev/null || echo hidden-to-child'",
		}, "; "))
		waitFiles(t, e.root, "started-"+name, 1)
		return a
	}
	finish := func(a *agent) string {
		t.Helper()
		a.stdin.Close()
		if code := a.wait(t); code != 0 {
			out, errs := a.output()
			t.Fatalf("agent: exit %d\n%s%s", code, out, errs)
		}
		out, _ := a.output()
		return out
	}

	hidden := blocking("hidden")
	edit("read", 2)
	readable := blocking("readable")
	if r := e.runNow("-w", "ws", "--", "cat", e.root+"/secret/key"); r.code != 0 || r.stdout != "KEY\n" {
		t.Errorf("the launch after widening: %+v, want the secret read", r)
	}
	edit("none", 3)
	if r := e.runNow("-w", "ws", "--", "sh", "-c", e.probe()); r.code != 0 {
		t.Errorf("the launch after narrowing: %+v", r)
	} else {
		wants(t, r.stdout, "secret-hidden")
	}

	out := finish(hidden)
	wants(t, out, "hidden-at-start", "hidden-after-edit", "hidden-to-child")
	if strings.Contains(out, "KEY") {
		t.Errorf("the agent started under none read the secret after the edit to read:\n%s", out)
	}
	out = finish(readable)
	if out != "KEY\nKEY\nKEY\n" {
		t.Errorf("the agent started under read said:\n%s\nwant the secret read at start, after narrowing, and by its child", out)
	}
	e.waitSettled(t)
}
