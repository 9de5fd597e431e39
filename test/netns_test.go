//go:build linux

package test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// netnsEnv is a marshald with profile sandboxed (isolation netns, egress
// to the web upstream only) and its workspace locked, profile coder
// (cgroup isolation) and its workspace webapp, and workspace offline
// (profile coder, network policy none); the upstream is on the host's
// loopback.
type netnsEnv struct {
	*daemon
	root string
	web  *upstream
}

const netnsManifests = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: sandboxed}
spec:
  isolation: netns
  egress:
    default: deny
    rules:
      - {action: allow, hosts: [localhost], ports: [%[2]s, 80]}
---
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder}
spec:
  egress:
    default: allow
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: locked}
spec:
  root: %[1]s
  profile: sandboxed
  processes: {max_live: 3}
  resources:
    participation: required
    request: {cpu_milli: 10, memory_bytes: 1048576, tasks: 8}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: webapp}
spec:
  root: %[1]s
  profile: coder
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: offline}
spec:
  root: %[1]s
  profile: coder
  network: {policy: none}
---
apiVersion: marshal.dev/v1alpha1
kind: Host
metadata: {name: local}
spec:
  capacity: {cpu_milli: 1600, memory_bytes: 8589934592, tasks: 4096}
`

// newNetnsEnv starts the daemon; extra are marshald's flags beyond the
// harness's. It skips where this host cannot make the namespaces.
func newNetnsEnv(t *testing.T, extra ...string) *netnsEnv {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	if out, err := exec.Command(filepath.Join(bin, "marshal-confine"), "check").CombinedOutput(); err != nil {
		t.Skipf("netns isolation is not available here: %s", bytes.TrimSpace(out))
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) })
	e := &netnsEnv{daemon: newDaemon(t), root: t.TempDir(), web: serve(t, hello, nil)}
	e.write("all.yaml", fmt.Sprintf(netnsManifests, e.root, e.web.port))
	e.start(append([]string{"--egress-address", "127.0.0.1:0"}, extra...)...)
	e.waitReady("locked", "webapp", "offline")
	return e
}

// probe is what an agent prints about where it runs: its cgroup, uid,
// links and capabilities, a request through the proxy variables, a
// direct one to the upstream, and whether it could enter the host's
// network namespace.
func (e *netnsEnv) probe() string {
	url := "http://localhost:" + e.web.port
	return strings.Join([]string{
		"cat /proc/self/cgroup",
		"echo uid $(id -u)",
		"echo links $(ip -o link | cut -d: -f2)",
		"grep CapEff /proc/self/status",
		"echo isolation $MARSHAL_ISOLATION network $MARSHAL_NETWORK",
		"curl -sS -o /dev/null -w 'proxied %{http_code}\\n' --max-time 10 " + url + "/proxied || echo proxied failed",
		"curl -sS -o /dev/null -w 'direct %{http_code}\\n' --noproxy '*' --max-time 10 http://127.0.0.1:" + e.web.port + "/direct || echo direct failed",
		"nsenter --net=/proc/1/ns/net true 2>/dev/null && echo nsenter entered || echo nsenter refused",
	}, "; ")
}

var scopeOfProfile = regexp.MustCompile(`marshal-[a-z]+-[0-9a-f]{32}\.scope`)

// The acceptance of netns isolation, as root and as an ordinary user
// (setpriv, as a person would): the agent's namespace has only lo, a
// direct connection to a server on the host's loopback fails and the
// server sees nothing, an allowed destination through the proxy works
// and is attributed to the agent's scope, the agent cannot enter the
// host's namespace, its uid is the caller's, and a user's agent holds no
// capability. Once it exits its scope is gone (no bridge left in it) and
// its slot and reservation are free.
func TestNetnsTheProxyIsTheOnlyWayOut(t *testing.T) {
	testutil.RequireRoot(t)
	e := newNetnsEnv(t, "--allow-group", "65534")
	for _, tc := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", 65534}} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.web.accepted.Load()
			cmd := e.runCmd("-w", "locked", "--", "sh", "-c", e.probe())
			if tc.uid != 0 {
				shareWith(t, e, tc.uid)
				cmd.Args = append([]string{"setpriv", "--reuid=" + strconv.Itoa(tc.uid), "--regid=65534", "--clear-groups"}, cmd.Args...)
				cmd.Path, _ = exec.LookPath("setpriv")
			}
			a := e.startCmd(cmd)
			a.stdin.Close()
			code := a.wait(t)
			out, stderr := a.output()
			if code != 0 {
				t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
			}
			for _, want := range []string{
				fmt.Sprintf("uid %d\n", tc.uid), "links lo\n", "isolation netns network open\n", "proxied 200\n",
				"direct failed\n", "nsenter refused\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the agent said:\n%s\nwant %q", out, want)
				}
			}
			if tc.uid != 0 && !strings.Contains(out, "CapEff:\t0000000000000000\n") {
				t.Errorf("a user's agent holds capabilities:\n%s", out)
			}
			if n := e.web.accepted.Load() - before; n != 1 {
				t.Errorf("the upstream accepted %d connections, want the proxied one only", n)
			}
			scope := scopeOfProfile.FindString(out)
			rec := e.egressRecord(func(r localapi.EgressRecord) bool { return r.Scope == scope && r.Host == "localhost" })
			if rec.Verdict != "allow" || rec.Transport != "unix" || rec.Profile != "sandboxed" || rec.Workspace != "locked" ||
				rec.Command != "marshal-bridge" {
				t.Errorf("audit record %+v, want allowed for %s, through the bridge on the unix socket", rec, scope)
			}
			e.waitSettled(t)
			if left := e.scopeDirs(); len(left) != 0 {
				t.Errorf("scopes left after the agent exited: %q", left)
			}
		})
	}
}

// A netns agent's resolver answers the names its profile allows, with a
// placeholder its bridge carries to the proxy by name, and no other: the
// allowed name resolves and a curl to it by that address reaches the
// upstream through the proxy, a denied name does not resolve, and both
// questions are in the egress log with the agent's scope, beside the
// connection the bridge carried by name. The name is
// localhost, the only one the proxy can resolve here without the
// network, and getent asks DNS alone (-s dns): /etc/hosts, which the
// agent shares with the host, would answer it first. The upstream is on
// port 80, where the bridge listens for placeholders.
func TestNetnsResolvesAllowedNamesOnly(t *testing.T) {
	testutil.RequireRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:80")
	if err != nil {
		t.Skipf("needs port 80 on loopback: %v", err)
	}
	web := serveOn(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) }), nil)
	e := newNetnsEnv(t)
	r := e.runNow("-w", "locked", "--", "sh", "-c", strings.Join([]string{
		"cat /proc/self/cgroup",
		"grep nameserver /etc/resolv.conf",
		"addr=$(getent -s dns hosts localhost | cut -d' ' -f1)",
		"echo allowed ${addr:-none}",
		"getent hosts denied.marshal.test; echo denied $?",
		"curl -sS --noproxy '*' --max-time 10 --resolve localhost:80:$addr http://localhost/named; echo",
	}, "; "))
	scope := scopeOfProfile.FindString(r.stdout)
	if r.code != 0 || scope == "" {
		t.Fatalf("the agent: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"nameserver 127.0.0.1\n", "allowed 127.77.", "denied 2\n", "hello /named\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the agent said:\n%s\nwant %q", r.stdout, want)
		}
	}
	if n := web.accepted.Load(); n != 1 {
		t.Errorf("the upstream on port 80 accepted %d connections, want 1", n)
	}
	ofScope := func(host, protocol string) localapi.EgressRecord {
		return e.egressRecord(func(r localapi.EgressRecord) bool {
			return r.Scope == scope && r.Host == host && r.Protocol == protocol
		})
	}
	if rec := ofScope("localhost", "dns"); rec.Verdict != "allow" || rec.Workspace != "locked" {
		t.Errorf("the allowed question's record %+v, want allowed for workspace locked", rec)
	}
	if rec := ofScope("denied.marshal.test", "dns"); rec.Verdict != "deny" || rec.Reason != "default" {
		t.Errorf("the denied question's record %+v, want denied by the default", rec)
	}
	if rec := ofScope("localhost", "socks5"); rec.Verdict != "allow" || rec.Port != 80 || rec.Address != "127.0.0.1:80" {
		t.Errorf("the placeholder's connection's record %+v, want allowed to port 80", rec)
	}
	log := e.ctl("egress", "log", "--workspace", "locked").stdout
	for _, want := range []string{"localhost (dns)", "denied.marshal.test (dns)"} {
		if !strings.Contains(log, want) {
			t.Errorf("marshalctl egress log:\n%s\nwant %q", log, want)
		}
	}
	e.waitSettled(t)
}

// shareWith lets uid reach the daemon's sockets, the binaries and the
// workspace: the test's directories are its own, 0700.
func shareWith(t *testing.T, e *netnsEnv, uid int) {
	t.Helper()
	for _, dir := range []string{bin, e.root, filepath.Dir(filepath.Dir(e.socket)), filepath.Dir(filepath.Dir(filepath.Dir(e.socket)))} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// egressRecord waits for the audit record that matches.
func (e *netnsEnv) egressRecord(match func(localapi.EgressRecord) bool) localapi.EgressRecord {
	e.t.Helper()
	env := &egressEnv{daemon: e.daemon}
	return env.records(1, match)[0]
}

// A process of a netns agent that writes itself into another profile's
// scope and connects to the proxy's unix socket directly borrows nothing:
// it sits in its own network namespace, so it is refused, and the audit
// line names the scope it claimed and the one whose namespace it is in.
// Its curl asks for the upstream, which the other profile allows.
func TestNetnsBorrowedIdentityIsRefused(t *testing.T) {
	testutil.RequireRoot(t)
	e := newNetnsEnv(t)
	victim := e.startRun("-w", "webapp", "--", "sh", "-c", "cat /proc/self/cgroup; read line")
	victimScope := waitScope(t, victim)
	procs := e.tree.V2("marshal", "marshal.slice", "marshal-coder.slice", victimScope, "cgroup.procs")
	socket := filepath.Join(filepath.Dir(e.socket), "marshal-egress.sock")
	r := e.runNow("-w", "locked", "--", "sh", "-c", "cat /proc/self/cgroup; echo $$ > "+procs+" && "+
		"curl -sS -o /dev/null --max-time 10 -x socks5h://localhost"+socket+" http://localhost:"+e.web.port+"/borrowed; echo borrowed $?")
	thief := scopeOfProfile.FindString(r.stdout)
	rec := e.egressRecord(func(r localapi.EgressRecord) bool { return r.Unscoped != "" })
	if strings.Contains(r.stdout, "borrowed 0\n") || thief == "" {
		t.Fatalf("the borrowed identity: %+v, want it refused; audit %+v", r, rec)
	}
	if rec.Verdict != "deny" || rec.Unscoped != "other_netns" || rec.Claimed != victimScope || rec.Namespace != thief || rec.Scope != "" ||
		rec.Transport != "unix" || rec.Protocol != "socks5" || rec.Host != "localhost" {
		t.Errorf("audit record %+v, want denied as other_netns, claiming %s from %s's namespace", rec, victimScope, thief)
	}
	if n := e.web.accepted.Load(); n != 0 {
		t.Errorf("the upstream accepted %d connections", n)
	}
	victim.stdin.Close()
	victim.wait(t)
	e.waitSettled(t)
}

// waitScope waits for a running agent to print its scope.
func waitScope(t *testing.T, a *agent) string {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(a.stdout.Name()); err != nil {
		t.Fatal(err)
	}
	var s string
	testutil.Eventually(t, w.Events, func() bool {
		out, _ := a.output()
		s = scopeOfProfile.FindString(out)
		return s != ""
	}, "the agent's scope")
	return s
}

// Twelve racing launches under max_live 3: each either runs, reaching
// the upstream through its bridge, or is refused busy; afterwards no
// scope, no bridge and no namespace is left: marshald holds none open.
func TestNetnsRacingLaunchesLeaveNothing(t *testing.T) {
	testutil.RequireRoot(t)
	e := newNetnsEnv(t)
	var wg sync.WaitGroup
	results := make([]result, 12)
	for i := range results {
		wg.Go(func() {
			results[i] = e.runNow("-w", "locked", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
				"http://localhost:"+e.web.port+"/race")
		})
	}
	wg.Wait()
	ran := 0
	for _, r := range results {
		switch {
		case r.code == 0 && r.stdout == "200":
			ran++
		case r.code == 75 && strings.HasPrefix(r.stderr, "WORKSPACE_BUSY"):
		default:
			t.Errorf("a racing launch: %+v, want it to run or be refused busy", r)
		}
	}
	if ran == 0 {
		t.Error("no launch ran")
	}
	e.waitSettled(t)
	if left := e.scopeDirs(); len(left) != 0 {
		t.Errorf("scopes left: %q", left)
	}
	if held := heldNamespaces(t, e.cmd.Process.Pid); len(held) != 0 {
		t.Errorf("marshald still holds network namespaces %q", held)
	}
}

// heldNamespaces lists the network namespaces pid holds open.
func heldNamespaces(t *testing.T, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, fd := range entries {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(link, "net:[") {
			held = append(held, link)
		}
	}
	return held
}

// Network policy none: a namespace of its own with no bridge and no
// proxy variables, whatever the profile says (coder allows everything).
func TestNetworkPolicyNoneHasNoWayOut(t *testing.T) {
	testutil.RequireRoot(t)
	e := newNetnsEnv(t)
	r := e.runNow("-w", "offline", "--", "sh", "-c", e.probe()+"; echo proxy ${HTTP_PROXY:-unset}")
	for _, want := range []string{"links lo\n", "isolation netns network none\n", "proxied failed\n", "direct failed\n", "proxy unset\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the agent said:\n%s\nwant %q", r.stdout, want)
		}
	}
	if n := e.web.accepted.Load(); n != 0 {
		t.Errorf("the upstream accepted %d connections", n)
	}
	e.waitSettled(t)
	if out := e.ctl("doctor").stdout; !strings.Contains(out, "✔ netns isolation: available") {
		t.Errorf("doctor:\n%s\nwant netns isolation available", out)
	}
}

// A caller where no namespace can be made (its user namespace's limit
// is 0) is refused with ISOLATION_UNSUPPORTED before the agent runs, and
// its slot and reservation are released.
func TestNetnsRefusedWhereNamespacesCannotBeMade(t *testing.T) {
	testutil.RequireRoot(t)
	e := newNetnsEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := e.runCmd("-w", "locked", "--", "touch", marker)
	cmd.Args = append([]string{"unshare", "--user", "--map-root-user", "sh", "-c",
		`echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`}, cmd.Args...)
	cmd.Path, _ = exec.LookPath("unshare")
	a := e.startCmd(cmd)
	a.stdin.Close()
	code := a.wait(t)
	_, stderr := a.output()
	if code != 78 || !strings.HasPrefix(stderr, "ISOLATION_UNSUPPORTED: netns isolation unavailable: the user namespace limit is reached") ||
		!strings.Contains(stderr, "nothing was started") {
		t.Errorf("exit %d, stderr %q; want 78 and ISOLATION_UNSUPPORTED", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the agent ran")
	}
	e.waitSettled(t)
}

// DevGuard's launch helper execs its program itself and gives it no
// network namespace: under a profile with netns isolation its launch is
// refused, definitely, before anything is made, and the program never
// runs.
func TestNetnsIsRefusedToTheDevGuardLaunchHelper(t *testing.T) {
	g := startDevGuardWith(t, func(m string) string {
		return strings.Replace(m, "metadata: {name: interactive}\nspec: {}", "metadata: {name: interactive}\nspec: {isolation: netns}", 1)
	})
	a := dgAdmission("netns-1")
	c, in := g.session(t, "codespace-a")
	if _, err := c.Admit(a); err != nil {
		t.Fatal(err)
	}
	s, _ := g.session(t, "codespace-a")
	grant, err := s.BeginLaunch(a.Key)
	if err != nil || grant.Permit == nil {
		t.Fatalf("begin_launch = %+v, %v", grant, err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	h := g.startHelper(t, "netns-1", in.InstanceID, *grant.Permit, nil, "/usr/bin/touch", marker)
	lines := h.transcript(t)
	if len(lines) != 1 || lines[0]["phase"] != "refused" || lines[0]["code"] != "resource_policy_unsupported" {
		t.Errorf("transcript %v, want the launch refused: resource_policy_unsupported", lines)
	}
	if code := h.wait(t); code == 0 {
		t.Errorf("the helper exited 0")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program ran")
	}
	if left := g.scopeDirs(); len(left) != 0 {
		t.Errorf("scopes made: %q", left)
	}
}

// A process of a netns agent that moves itself out of its scope is still
// known by the network namespace it cannot leave: to the local API it is
// the most restricted agent, never its user. It may read; a run starts
// nothing and a delete changes nothing.
func TestNetnsAgentOutOfItsScopeIsNoUser(t *testing.T) {
	testutil.RequireRoot(t)
	e := newNetnsEnv(t)
	out := t.TempDir()
	procs := e.tree.V2("marshal", "cgroup.procs")
	script := "echo $$ > " + procs + " || exit 9\n" + strings.ReplaceAll(controlScript(out,
		"get get workspaces",
		"run run -w webapp -- touch "+filepath.Join(out, "ran"),
		"delete delete workspace webapp --wait=false",
	), "marshalctl ", "marshalctl --socket "+e.socket+" ")
	r := e.runNow("-w", "locked", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("the agent's script: exit %d\n%s", r.code, r.stderr)
	}
	if self, _ := os.ReadFile(filepath.Join(out, "self")); scopeInCgroup.Match(self) {
		t.Fatalf("the process did not leave its scope:\n%s", self)
	}
	got := answers(t, out, "get", "run", "delete")
	if a := got["get"]; a.code != 0 {
		t.Errorf("get from a netns agent out of its scope: exit %d\n%s", a.code, a.out)
	}
	if a := got["run"]; a.code != 77 || !strings.Contains(a.out, "network namespace of an agent") {
		t.Errorf("run from a netns agent out of its scope: exit %d, want 77 naming its namespace\n%s", a.code, a.out)
	}
	if _, err := os.Stat(filepath.Join(out, "ran")); err == nil {
		t.Error("the refused run ran its command")
	}
	if a := got["delete"]; a.code != 3 || !strings.Contains(a.out, "most restricted agent") {
		t.Errorf("delete from a netns agent out of its scope: exit %d\n%s", a.code, a.out)
	}
	if r := e.ctl("get", "workspace", "webapp"); r.code != 0 {
		t.Errorf("the refused delete removed workspace webapp: %s", r.stderr)
	}
}
