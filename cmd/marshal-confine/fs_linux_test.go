//go:build linux && cgo

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fsAgentEnv makes the test binary the agent of the filesystem tests: it
// tries what its probe (fsProbeEnv, JSON) names and prints, per try, ""
// when it succeeded or the error.
const (
	fsAgentEnv = "MARSHAL_CONFINE_TEST_FS"
	fsProbeEnv = "MARSHAL_CONFINE_TEST_PROBE"
)

// probe is what the filesystem agent is told.
type probe struct {
	Home, WS   string
	Socket     string // a listening unix socket under a none path
	Abstract   string // a listening abstract unix socket outside the agent
	OutsidePID int    // a process outside the agent's tree
	Neighbor   int    // a process of the agent's user outside its tree, in Home
	// Late are paths made only once the agent runs, which it reads
	// (late_0, late_1, ...) after it says it runs, on fd 3, and its
	// standard input ends; late_listed is what it then lists in Home.
	Late []string
	// made makes Late, once the agent runs.
	made     func()
	Secret   string // a file a rule hides, read as read_secret
	HostShm  string // a file in the host's /dev/shm, read as read_host_shm
	AgentShm string // where in /dev/shm the agent writes, as write_shm
	SysvID   int    // a System V shared memory segment outside, attached as sysv_shm_outside
}

func fsAgent() int {
	var p probe
	if err := json.Unmarshal([]byte(os.Getenv(fsProbeEnv)), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res := map[string]string{}
	try := func(name string, err error) {
		res[name] = ""
		if err != nil {
			res[name] = err.Error()
		}
	}
	write := func(path string) error { return os.WriteFile(path, []byte("x"), 0o644) }
	// A hidden file reads as empty to root (whose capabilities pass its
	// mode), and refuses everyone else: a read found nothing unless it
	// found content.
	read := func(path string) error {
		data, err := os.ReadFile(path)
		if err == nil && len(data) == 0 {
			return errors.New("empty")
		}
		return err
	}
	run := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir = p.WS
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
	try("write_workspace_root", write(filepath.Join(p.WS, "new-file")))
	try("write_workspace_deep", write(filepath.Join(p.WS, "src", "main.go")))
	try("write_tmp", write(filepath.Join(os.Getenv("TMPDIR"), "scratch")))
	try("write_home", write(filepath.Join(p.Home, "planted")))
	try("write_shm", write(p.AgentShm))
	try("read_host_shm", read(p.HostShm))
	try("sysv_shm_outside", func() error {
		b, err := unix.SysvShmAttach(p.SysvID, 0, 0)
		if err == nil {
			unix.SysvShmDetach(b)
		}
		return err
	}())
	try("write_etc", write("/etc/marshal-confine-test"))
	try("read_home", read(filepath.Join(p.Home, "notes.txt")))
	try("read_ssh", read(filepath.Join(p.Home, ".ssh", "id_ed25519")))
	try("read_granted_in_hidden", read(filepath.Join(p.Home, ".ssh", "known_hosts")))
	try("write_granted_in_hidden", write(filepath.Join(p.Home, ".ssh", "known_hosts")))
	try("list_ssh", func() error { _, err := os.ReadDir(filepath.Join(p.Home, ".ssh")); return err }())
	try("read_aws", read(filepath.Join(p.Home, ".aws", "credentials")))
	// Through a process of the same user outside, whose root is the
	// host's mount namespace and whose working directory is the home:
	// Landlock refuses /proc/PID/root and cwd outside the agent's domain.
	try("read_ssh_via_proc_root", read(fmt.Sprintf("/proc/%d/root%s", p.Neighbor, filepath.Join(p.Home, ".ssh", "id_ed25519"))))
	try("read_ssh_via_proc_cwd", read(fmt.Sprintf("/proc/%d/cwd/.ssh/id_ed25519", p.Neighbor)))
	try("read_secret_file", read(filepath.Join(p.Home, ".netrc")))
	if p.Secret != "" {
		try("read_secret", read(p.Secret))
	}
	// A grandchild: the rules hold for the whole tree.
	try("grandchild_read_ssh", run("sh", "-c", `sh -c 'cat "$1"' _ "$1"`, "_", filepath.Join(p.Home, ".ssh", "id_ed25519")))
	try("write_hooks", write(filepath.Join(p.WS, ".git", "hooks", "pre-commit")))
	try("write_git_config", run("git", "config", "core.hooksPath", "/tmp"))
	try("git_commit", run("git", "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "--allow-empty", "-m", "confined"))
	dial := func(path string) error {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		return err
	}
	try("connect_socket", dial(p.Socket))
	try("connect_ssh_agent", dial(os.Getenv("SSH_AUTH_SOCK")))
	try("connect_abstract", func() error {
		c, err := net.Dial("unix", "@"+p.Abstract)
		if err == nil {
			c.Close()
		}
		return err
	}())
	try("signal_outside", unix.Kill(p.OutsidePID, 0))
	try("umount", unix.Unmount(filepath.Join(p.Home, ".ssh"), unix.MNT_DETACH))
	try("unshare_and_umount", run("unshare", "-Urm", "sh", "-c", `umount -l "$1" && cat "$1/id_ed25519"`, "_", filepath.Join(p.Home, ".ssh")))
	try("mount_over", unix.Mount("none", p.WS, "tmpfs", 0, ""))
	try("tiocsti", func() error {
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		if errno != 0 {
			return errno
		}
		return nil
	}())
	if len(p.Late) > 0 {
		ready := os.NewFile(3, "ready")
		ready.Write([]byte{1})
		ready.Close()
		io.Copy(io.Discard, os.Stdin)
		for i, path := range p.Late {
			try(fmt.Sprintf("late_%d", i), read(path))
		}
		entries, _ := os.ReadDir(p.Home)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		res["late_listed"] = strings.Join(names, " ")
	}
	nnp, _ := os.ReadFile("/proc/self/status")
	res["no_new_privs"] = "0"
	if bytes.Contains(nnp, []byte("NoNewPrivs:\t1")) {
		res["no_new_privs"] = "1"
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// fsFixture is a fake home and a workspace, a git repository, where the
// user the test runs the agent as may write, so that only confinement
// refuses.
type fsFixture struct {
	base, home, ws, tmp string
	socket              string
	abstract            string
	// hostShm is a file in the host's /dev/shm; agentShm where the agent
	// writes one.
	hostShm, agentShm string
	// sysvID is a System V shared memory segment outside the agent,
	// which every user may attach.
	sysvID int
	// sshAgent is a listening socket where ssh-agent puts its own, in a
	// directory below /tmp that no rule names: SSH_AUTH_SOCK names it.
	sshAgent string
}

func newFSFixture(t *testing.T, f fixture) fsFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	base, err := os.MkdirTemp(f.dir, "fs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	x := fsFixture{base: base, home: filepath.Join(base, "home"), ws: filepath.Join(base, "home", "src", "app")}
	x.tmp = filepath.Join(base, "launch-tmp")
	for path, data := range map[string]string{
		"home/notes.txt":            "notes",
		"home/.ssh/id_ed25519":      "PRIVATE KEY",
		"home/.ssh/known_hosts":     "example.com ssh-ed25519 AAAA",
		"home/.aws/credentials":     "aws_secret_access_key = x",
		"home/.netrc":               "machine github.com password x",
		"home/src/app/src/main.go":  "package main",
		"home/src/app/README":       "app",
		"home/src/app/.placeholder": "",
	} {
		p := filepath.Join(base, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = x.ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "--allow-empty", "-m", "first")
	if err := os.WriteFile(filepath.Join(x.ws, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	// An agent socket under a none path, as ssh-agent's would be.
	x.socket = filepath.Join(x.home, ".ssh", "agent.sock")
	ln, err := net.Listen("unix", x.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	x.sshAgent = filepath.Join(base, "ssh-agent", "agent.1")
	if err := os.Mkdir(filepath.Dir(x.sshAgent), 0o700); err != nil {
		t.Fatal(err)
	}
	agentLn, err := net.Listen("unix", x.sshAgent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agentLn.Close() })
	x.hostShm = fmt.Sprintf("/dev/shm/marshal-confine-test-%d-%d", os.Getpid(), sockets.Add(1))
	x.agentShm = x.hostShm + "-agent"
	if err := os.WriteFile(x.hostShm, []byte("host segment"), 0o666); err != nil {
		t.Skipf("needs /dev/shm: %v", err)
	}
	os.Chmod(x.hostShm, 0o666)
	t.Cleanup(func() {
		os.Remove(x.hostShm)
		os.Remove(x.agentShm)
	})
	x.sysvID, err = unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o666)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(x.sysvID, unix.IPC_RMID, nil) })
	x.abstract = fmt.Sprintf("marshal-confine-test-%d-%d", os.Getpid(), sockets.Add(1))
	aln, err := net.Listen("unix", "@"+x.abstract)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aln.Close() })
	// Everything is every user's, as a home is its user's: only the
	// confinement refuses.
	if err := exec.Command("chmod", "-R", "a+rwX", base).Run(); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o777|os.ModeSticky)
	return x
}

// rules are the arguments a launch under the default rules gets, as
// marshald expands them.
func (x fsFixture) rules() []string {
	args := []string{"--fs-default", "read", "--tmp", x.tmp}
	for _, r := range []string{
		"write:" + x.ws, "write:" + x.tmp, "write:/dev/null", "write:/dev/tty",
		"none@default:" + x.home + "/.ssh", "none@default:" + x.home + "/.aws", "none@default:" + x.home + "/.netrc",
		"read:" + x.ws + "/.git/hooks", "read:" + x.ws + "/.git/config",
		// Granted beneath a hidden directory: bound back into it.
		"read:" + x.home + "/.ssh/known_hosts",
	} {
		args = append(args, "--fs", r)
	}
	return args
}

// runFSAgent runs the filesystem agent through the helper with args, as
// the user cred names (nil: this process's), and returns what it found.
func runFSAgent(t *testing.T, f fixture, x fsFixture, cred *unix.Ucred, env []string, args ...string) (map[string]string, error) {
	t.Helper()
	return runFSAgentProbe(t, f, x, probe{}, cred, env, args...)
}

// runFSAgentProbe is runFSAgent with the probe's Secret.
func runFSAgentProbe(t *testing.T, f fixture, x fsFixture, pr probe, cred *unix.Ucred, env []string, args ...string) (map[string]string, error) {
	t.Helper()
	argv := append(append([]string{"exec"}, args...), "--", f.agent)
	cmd := exec.Command(f.helper, argv...)
	if cred != nil {
		cmd = exec.Command("setpriv", append([]string{
			"--reuid=" + strconv.Itoa(int(cred.Uid)), "--regid=" + strconv.Itoa(int(cred.Gid)), "--clear-groups", f.helper,
		}, argv...)...)
	}
	pr.Home, pr.WS, pr.Socket, pr.Abstract, pr.OutsidePID = x.home, x.ws, x.socket, x.abstract, os.Getpid()
	pr.HostShm, pr.AgentShm, pr.SysvID = x.hostShm, x.agentShm, x.sysvID
	neighbor := exec.Command("sleep", "3600")
	if cred != nil {
		neighbor = exec.Command("setpriv", "--reuid="+strconv.Itoa(int(cred.Uid)), "--regid="+strconv.Itoa(int(cred.Gid)), "--clear-groups", "sleep", "3600")
	}
	neighbor.Dir = x.home
	if err := neighbor.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		neighbor.Process.Kill()
		neighbor.Wait()
	}()
	pr.Neighbor = neighbor.Process.Pid
	p, _ := json.Marshal(pr)
	cmd.Env = append(os.Environ(), append([]string{"SSH_AUTH_SOCK=" + x.sshAgent}, append(env, fsAgentEnv+"=1", fsProbeEnv+"="+string(p), "HOME="+x.home)...)...)
	cmd.Dir = x.ws
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var ready *os.File
	var stdin io.WriteCloser
	if pr.made != nil {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cmd.ExtraFiles, ready = []*os.File{w}, r
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if ready != nil {
		cmd.ExtraFiles[0].Close()
		// Nothing comes back from an agent that never ran.
		if _, err := ready.Read(make([]byte, 1)); err == nil {
			pr.made()
		}
		stdin.Close()
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	var res map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("the agent said %q: %v", stdout.Bytes(), err)
	}
	return res, nil
}

// users are who a test runs the helper as: the test's own user, and
// nobody as well when the test is root.
func users(t *testing.T) []struct {
	name string
	cred *unix.Ucred
} {
	us := []struct {
		name string
		cred *unix.Ucred
	}{{name: "self"}}
	if os.Geteuid() == 0 {
		us = append(us, struct {
			name string
			cred *unix.Ucred
		}{"nobody", &unix.Ucred{Uid: 65534, Gid: 65534}})
	}
	return us
}

func fsSetup(t *testing.T) fixture {
	f := setup(t)
	if out, err := exec.Command(f.helper, "check", "--fs").CombinedOutput(); err != nil {
		t.Skipf("filesystem confinement is not available here: %s", bytes.TrimSpace(out))
	}
	return f
}

// The default rules, as root and as an ordinary user: the workspace and
// {tmp} writable, nothing else; credential stores unreadable, also by a
// grandchild; .git/hooks and .git/config unchanged while git commit
// works; a socket under a none path and an abstract socket outside
// unreachable; signals outside refused; every way to undo it refused.
// Without a network namespace, in one, and in one with a bridge (whose
// resolver's /etc/resolv.conf is a mount too).
func TestConfinementHolds(t *testing.T) {
	f := fsSetup(t)
	bridge := upstream(t, f.dir)
	networks := map[string][]string{
		"host":   {"--network", "host"},
		"none":   {"--network", "none"},
		"bridge": {"--network", "none", "--socket", bridge},
	}
	for _, u := range users(t) {
		for _, network := range []string{"host", "none", "bridge"} {
			t.Run(u.name+"_network_"+network, func(t *testing.T) {
				x := newFSFixture(t, f)
				hook, _ := os.ReadFile(filepath.Join(x.ws, ".git", "hooks", "pre-commit"))
				config, _ := os.ReadFile(filepath.Join(x.ws, ".git", "config"))
				res, err := runFSAgent(t, f, x, u.cred, nil, append(slices.Clone(networks[network]), x.rules()...)...)
				if err != nil {
					t.Fatal(err)
				}
				for _, ok := range []string{"write_workspace_root", "write_workspace_deep", "write_tmp", "write_shm", "read_home", "git_commit", "read_granted_in_hidden"} {
					if res[ok] != "" {
						t.Errorf("%s: %s, want it to succeed", ok, res[ok])
					}
				}
				for _, refused := range []string{"write_home", "write_etc", "read_ssh", "read_aws", "read_secret_file", "write_granted_in_hidden",
					"read_ssh_via_proc_root", "read_ssh_via_proc_cwd", "read_host_shm", "sysv_shm_outside", "grandchild_read_ssh", "write_hooks", "write_git_config", "connect_socket", "connect_ssh_agent", "connect_abstract",
					"signal_outside", "umount", "unshare_and_umount", "mount_over", "tiocsti"} {
					if res[refused] == "" {
						t.Errorf("%s succeeded, want it refused", refused)
					}
				}
				if u.cred != nil && res["list_ssh"] == "" {
					t.Errorf("list_ssh succeeded for an ordinary user, want it refused")
				}
				if !strings.Contains(res["tiocsti"], "operation not permitted") {
					t.Errorf("tiocsti: %s, want refused by the filter (EPERM)", res["tiocsti"])
				}
				if res["no_new_privs"] != "1" {
					t.Errorf("no_new_privs = %s, want 1: a setuid program could gain privileges", res["no_new_privs"])
				}
				if got, _ := os.ReadFile(filepath.Join(x.ws, ".git", "hooks", "pre-commit")); !bytes.Equal(got, hook) {
					t.Errorf(".git/hooks/pre-commit changed: %q", got)
				}
				if got, _ := os.ReadFile(filepath.Join(x.ws, ".git", "config")); !bytes.Equal(got, config) {
					t.Errorf(".git/config changed: %q", got)
				}
				if _, err := os.Stat(filepath.Join(x.home, "planted")); err == nil {
					t.Errorf("a file was planted in the home")
				}
				if _, err := os.Stat(x.agentShm); err == nil {
					t.Errorf("the agent's /dev/shm segment is in the host's /dev/shm: want a /dev/shm of its own")
				}
				if _, err := os.Stat(filepath.Join(x.ws, "new-file")); err != nil {
					t.Errorf("the workspace's new file is not on the host: %v", err)
				}
				// Nothing leaked to the host: the mounts were the agent's.
				if data, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(data, []byte(x.home)) {
					t.Errorf("a mount under the fake home is in the host's namespace")
				}
			})
		}
	}
}

// A launch without filesystem flags is unchanged: it writes where its
// user may.
func TestNoRulesNoConfinement(t *testing.T) {
	f := fsSetup(t)
	x := newFSFixture(t, f)
	res, err := runFSAgent(t, f, x, nil, nil, "--network", "none")
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"write_home", "read_ssh", "write_hooks", "connect_socket", "connect_ssh_agent", "write_shm", "read_host_shm", "sysv_shm_outside"} {
		if res[ok] != "" {
			t.Errorf("%s: %s, want it to succeed without rules", ok, res[ok])
		}
	}
	// Without a namespace, a process of the user's outside is open to
	// it: what TestConfinementHolds sees refused, Landlock refuses.
	res, err = runFSAgent(t, f, x, nil, nil, "--network", "host")
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"read_ssh_via_proc_root", "read_ssh_via_proc_cwd"} {
		if res[ok] != "" {
			t.Errorf("%s: %s, want it to succeed without rules or namespaces", ok, res[ok])
		}
	}
}

// The ssh agent's socket is hidden by default only: a rule that names
// it lets the agent reach it, while the rest holds.
func TestSSHAgentNamedByARuleIsReachable(t *testing.T) {
	f := fsSetup(t)
	x := newFSFixture(t, f)
	args := append(append([]string{"--network", "host"}, x.rules()...), "--fs", "read:"+x.sshAgent)
	res, err := runFSAgent(t, f, x, nil, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	if res["connect_ssh_agent"] != "" {
		t.Errorf("connect_ssh_agent: %s, want it to succeed: a rule names the socket", res["connect_ssh_agent"])
	}
	if res["read_ssh"] == "" || res["connect_socket"] == "" {
		t.Errorf("read_ssh %q, connect_socket %q: want both refused", res["read_ssh"], res["connect_socket"])
	}
}

// A none path absent at launch stays unreadable when somebody makes it
// while the agent runs, as does what is made then directly in a
// directory on the way to it (the home), which the agent still lists;
// what existed at launch stays readable. A rule without an origin
// (marshald's own paths, the host's services: sockets) leaves the
// default read as it is, and the agent reads both. As root and as an
// ordinary user.
func TestAbsentNonePathMadeLaterStaysUnreadable(t *testing.T) {
	f := fsSetup(t)
	for _, u := range users(t) {
		for _, origin := range []string{"@default", ""} {
			t.Run(u.name+"_origin_"+strings.TrimPrefix(origin, "@"), func(t *testing.T) {
				x := newFSFixture(t, f)
				aws := filepath.Join(x.home, ".aws")
				if err := os.RemoveAll(aws); err != nil {
					t.Fatal(err)
				}
				late := []string{filepath.Join(aws, "credentials"), filepath.Join(x.home, "late.txt")}
				pr := probe{Late: late, made: func() {
					os.Mkdir(aws, 0o755)
					for _, path := range late {
						if err := os.WriteFile(path, []byte("made later"), 0o644); err != nil {
							t.Error(err)
						}
					}
				}}
				var args []string
				for _, a := range append([]string{"--network", "host"}, x.rules()...) {
					args = append(args, strings.Replace(a, "none@default:"+aws, "none"+origin+":"+aws, 1))
				}
				res, err := runFSAgentProbe(t, f, x, pr, u.cred, nil, args...)
				if err != nil {
					t.Fatal(err)
				}
				if origin == "" {
					if res["late_0"] != "" || res["late_1"] != "" {
						t.Errorf("late_0 %q, late_1 %q: want both read, the default read unchanged", res["late_0"], res["late_1"])
					}
					return
				}
				for _, refused := range []string{"late_0", "late_1", "read_ssh"} {
					if res[refused] == "" {
						t.Errorf("%s succeeded, want it refused", refused)
					}
				}
				for _, ok := range []string{"read_home", "write_workspace_root", "git_commit", "read_granted_in_hidden"} {
					if res[ok] != "" {
						t.Errorf("%s: %s, want it to succeed", ok, res[ok])
					}
				}
				if listed := strings.Fields(res["late_listed"]); !slices.Contains(listed, ".aws") || !slices.Contains(listed, "late.txt") {
					t.Errorf("the home lists %q, want .aws and late.txt in it", listed)
				}
			})
		}
	}
}

// A host whose Landlock is older than confinement needs (simulated by
// the setting) refuses before the agent starts, naming what is missing.
func TestOldLandlockRefuses(t *testing.T) {
	f := fsSetup(t)
	x := newFSFixture(t, f)
	_, err := runFSAgent(t, f, x, nil, []string{"MARSHAL_LANDLOCK_ABI_MAX=1"}, append([]string{"--network", "host", "--attempt", "00ff"}, x.rules()...)...)
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 78 {
		t.Fatalf("err = %v, want exit status 78", err)
	}
	want := "ISOLATION_UNSUPPORTED: filesystem confinement unavailable: Landlock ABI 2 or later is needed, this host gives 1"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing was started") {
		t.Errorf("refusal %q, want %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(x.ws, "new-file")); err == nil {
		t.Errorf("the agent ran")
	}
}
