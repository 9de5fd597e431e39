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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// agentEnv makes the test binary the agent the tests run: it looks at
// the namespace it finds itself in, prints what it saw as JSON and exits.
const agentEnv = "MARSHAL_NETNS_TEST_AGENT"

// Where the agent tries to connect, set by the test.
const (
	envHostAddr  = "MARSHAL_NETNS_TEST_HOST"     // a server on the host's loopback
	envOtherAddr = "MARSHAL_NETNS_TEST_OTHER"    // a server on another address of the host
	envBridge    = "MARSHAL_NETNS_TEST_BRIDGE"   // the bridge
	envServices  = "MARSHAL_NETNS_TEST_SERVICES" // unix sockets, comma-separated
)

// seen is what the agent reports.
type seen struct {
	UID, GID int
	CapEff   string
	Links    []string
	// Host and Other are the errors of direct connections, "" when one
	// succeeded; Bridged is what came back through the bridge.
	Host, Other string
	Bridged     string
	// Nsenter is nsenter --net=/proc/1/ns/net's exit status.
	Nsenter int
	// Bridge is the pid of the bridge in this namespace, 0 when none;
	// BridgeFDs what its file descriptors are.
	Bridge    int
	BridgeFDs []string
	// Resolver is the answer of 127.0.0.1:53 to a TXT question, or the
	// error.
	Resolver string
	// PortStart is the namespace's net.ipv4.ip_unprivileged_port_start.
	PortStart string
	// Nameservers are /etc/resolv.conf's nameserver lines; ResolvWrite
	// the error of opening it for writing (nothing is written).
	Nameservers []string
	ResolvWrite string
	// Services are the errors of connecting to each of envServices'
	// sockets, "" where one connected; Unmounts those of unmounting
	// each, nothing where all failed.
	Services []string
	Unmounts []string
}

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) != "" {
		os.Exit(agent())
	}
	if os.Getenv(fsAgentEnv) != "" {
		os.Exit(fsAgent())
	}
	code := m.Run()
	if fix.dir != "" {
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

func agent() int {
	s := seen{UID: os.Getuid(), GID: os.Getgid(), CapEff: procStatus("CapEff"), Nsenter: -1}
	if out, err := exec.Command("ip", "-o", "link").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			if f := strings.Fields(line); len(f) > 1 {
				s.Links = append(s.Links, strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	s.Bridge = bridgeHere()
	if s.Bridge != 0 {
		dir := fmt.Sprintf("/proc/%d/fd/", s.Bridge)
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			link, _ := os.Readlink(dir + fd.Name())
			if strings.HasPrefix(link, "socket:") {
				link = "socket"
			}
			s.BridgeFDs = append(s.BridgeFDs, fd.Name()+"="+link)
		}
	}
	if os.Getenv(envBridge) != "" {
		s.Resolver = askResolver()
	}
	s.Nameservers, s.ResolvWrite = resolvConf()
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		s.PortStart = strings.TrimSpace(string(b))
	}
	if services := os.Getenv(envServices); services != "" {
		for path := range strings.SplitSeq(services, ",") {
			s.Services = append(s.Services, dialUnixErr(path))
		}
		for path := range strings.SplitSeq(services, ",") {
			if err := unix.Unmount(path, unix.MNT_DETACH); err == nil {
				s.Unmounts = append(s.Unmounts, path)
			}
			// In a user and mount namespace of its own, where it holds
			// every capability over the mounts' copies.
			if exec.Command("unshare", "-Urm", "umount", "-l", path).Run() == nil {
				s.Unmounts = append(s.Unmounts, "unshare:"+path)
			}
		}
	}
	s.Host = dialErr(os.Getenv(envHostAddr))
	s.Other = dialErr(os.Getenv(envOtherAddr))
	if addr := os.Getenv(envBridge); addr != "" {
		s.Bridged = roundTrip(addr, "ping")
	}
	err := exec.Command("nsenter", "--net=/proc/1/ns/net", "true").Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		s.Nsenter = 0
	case errors.As(err, &ee):
		s.Nsenter = ee.ExitCode()
	}
	json.NewEncoder(os.Stdout).Encode(s)
	return 0
}

// dialUnixErr returns the error of connecting to the unix socket at
// path, "" when it connected.
func dialUnixErr(path string) string {
	c, err := net.Dial("unix", path)
	if err != nil {
		return err.Error()
	}
	c.Close()
	return ""
}

// resolvConf returns the nameserver lines of /etc/resolv.conf, and the
// error of opening it for writing, "" when it opened.
func resolvConf() ([]string, string) {
	var servers []string
	data, _ := os.ReadFile("/etc/resolv.conf")
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "nameserver") {
			servers = append(servers, strings.TrimSpace(line))
		}
	}
	f, err := os.OpenFile("/etc/resolv.conf", os.O_WRONLY, 0)
	if err != nil {
		return servers, err.Error()
	}
	f.Close()
	return servers, ""
}

func procStatus(key string) string {
	data, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func dialErr(addr string) string {
	if addr == "" {
		return ""
	}
	c, err := net.DialTimeout("tcp", addr, testutil.Deadline)
	if err != nil {
		return err.Error()
	}
	c.Close()
	return ""
}

// askResolver asks 127.0.0.1:53 a TXT question, which the bridge's
// resolver refuses without asking the proxy, and returns the answer's
// rcode, or the error.
func askResolver() string {
	q := dnsmessage.Message{Header: dnsmessage.Header{ID: 7}, Questions: []dnsmessage.Question{
		{Name: dnsmessage.MustNewName("a.test."), Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET},
	}}
	b, _ := q.Pack()
	c, err := net.Dial("udp", "127.0.0.1:53")
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testutil.Deadline))
	if _, err := c.Write(b); err != nil {
		return err.Error()
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return err.Error()
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil {
		return err.Error()
	}
	return m.RCode.String()
}

// roundTrip sends msg, half-closes and returns the answer, or the error.
func roundTrip(addr, msg string) string {
	c, err := net.DialTimeout("tcp", addr, testutil.Deadline)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testutil.Deadline))
	c.Write([]byte(msg))
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// bridgeHere finds the bridge: the process named marshal-bridge in this
// network namespace.
func bridgeHere() int {
	self, _ := os.Readlink("/proc/self/ns/net")
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if strings.TrimSpace(string(comm)) == "marshal-bridge" && ns == self {
			return pid
		}
	}
	return 0
}

// fixture is what the tests share: the helper, a copy of the test binary
// as the agent, both where any user may run them.
type fixture struct {
	helper, agent string
	dir           string
}

var (
	fixtureOnce sync.Once
	fix         fixture
	fixErr      error
)

func setup(t testing.TB) fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mnetns-")
		if err != nil {
			fixErr = err
			return
		}
		os.Chmod(dir, 0o755)
		fix.dir = dir
		if fix.helper, fixErr = testutil.BuildConfine(dir); fixErr != nil {
			return
		}
		self, err := os.Executable()
		if err != nil {
			fixErr = err
			return
		}
		fix.agent = filepath.Join(dir, "agent")
		fixErr = copyFile(self, fix.agent)
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	out, err := exec.Command(fix.helper, "check").CombinedOutput()
	if err != nil {
		t.Skipf("netns isolation is not available here: %s", bytes.TrimSpace(out))
	}
	return fix
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

var sockets atomic.Int64

// upstream stands for the egress proxy: a unix socket that answers
// each connection with "proxy:" and what it read.
func upstream(t *testing.T, dir string) string {
	t.Helper()
	// Short: a socket's path has room for 107 bytes.
	path := filepath.Join(dir, "u"+strconv.FormatInt(sockets.Add(1), 10)+".sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o666)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write(append([]byte("proxy:"), b...))
			})
		}
	})
	return path
}

// hostServer listens on addr of the host and reports whether anything
// connected.
type hostServer struct {
	ln *net.TCPListener
}

func listenHost(t *testing.T, ip string) *hostServer {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &hostServer{ln: ln}
}

// saw reports whether a connection waits to be accepted. The agent has
// exited: a connection it made would be queued by now.
func (s *hostServer) saw() bool {
	s.ln.SetDeadline(time.Now())
	c, err := s.ln.Accept()
	if err == nil {
		c.Close()
		return true
	}
	return false
}

// otherAddress is an address of this host that is not loopback, or "".
func otherAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// runAgent runs the agent through the helper with args before "--", as
// the user the credential names (nil: this process's), and returns what
// it saw.
func runAgent(t *testing.T, f fixture, cred *unix.Ucred, env []string, args ...string) seen {
	t.Helper()
	argv := append([]string{"exec"}, args...)
	argv = append(argv, "--", f.agent)
	cmd := exec.Command(f.helper, argv...)
	if cred != nil {
		// setpriv, as a person would run it: the helper then starts as
		// that user, from a single-threaded exec.
		cmd = exec.Command("setpriv", append([]string{
			"--reuid=" + strconv.Itoa(int(cred.Uid)), "--regid=" + strconv.Itoa(int(cred.Gid)), "--clear-groups", f.helper,
		}, argv...)...)
	}
	cmd.Env = append(os.Environ(), append(env, agentEnv+"=1")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.Bytes())
	}
	var s seen
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("the agent said %q: %v", out, err)
	}
	return s
}

// The agent's only way out is the bridge: direct connections to the
// host's loopback and to its other addresses fail and reach nothing, the
// namespace has only lo, the bridge reaches the proxy's socket, and the
// agent cannot return to the host's network namespace. Its uid and gid
// are its own, it holds no capability unless it is root, and the bridge
// is gone once it exits. As root and as an ordinary user.
func TestTheBridgeIsTheOnlyWayOut(t *testing.T) {
	f := setup(t)
	for _, u := range users(t) {
		t.Run(u.name, func(t *testing.T) {
			loop := listenHost(t, "127.0.0.1")
			env := []string{envHostAddr + "=" + loop.ln.Addr().String(), envBridge + "=127.0.0.1:3128"}
			var other *hostServer
			if ip := otherAddress(); ip != "" {
				other = listenHost(t, ip)
				env = append(env, envOtherAddr+"="+other.ln.Addr().String())
			}
			s := runAgent(t, f, u.cred, env, "--socket", upstream(t, f.dir))
			wantUID, wantGID := os.Getuid(), os.Getgid()
			if u.cred != nil {
				wantUID, wantGID = int(u.cred.Uid), int(u.cred.Gid)
			}
			if s.UID != wantUID || s.GID != wantGID {
				t.Errorf("uid %d gid %d inside, want %d %d", s.UID, s.GID, wantUID, wantGID)
			}
			if wantUID != 0 && s.CapEff != "0000000000000000" {
				t.Errorf("CapEff %s inside, want none", s.CapEff)
			}
			if strings.Join(s.Links, " ") != "lo" {
				t.Errorf("links inside %q, want only lo", s.Links)
			}
			if s.Host == "" || loop.saw() {
				t.Errorf("a direct connection to the host's loopback: error %q, server saw it %v; want it refused, unseen", s.Host, loop.saw())
			}
			if other != nil && (!strings.Contains(s.Other, "network is unreachable") || other.saw()) {
				t.Errorf("a direct connection to %s: error %q; want network is unreachable, unseen", other.ln.Addr(), s.Other)
			}
			if s.Bridged != "proxy:ping" {
				t.Errorf("through the bridge: %q, want proxy:ping", s.Bridged)
			}
			if s.Resolver != "RCodeRefused" {
				t.Errorf("the resolver at 127.0.0.1:53 answered a TXT question %q, want RCodeRefused", s.Resolver)
			}
			if got := strings.Join(s.Nameservers, ","); got != "nameserver 127.0.0.1" || !strings.Contains(s.ResolvWrite, "read-only file system") {
				t.Errorf("/etc/resolv.conf inside names %q, opening it for writing: %q; want only the bridge's resolver, read-only", got, s.ResolvWrite)
			}
			if s.PortStart != "0" {
				t.Errorf("ip_unprivileged_port_start %q inside, want 0: the bridge listens on placeholders' ports 80 and 443", s.PortStart)
			}
			if s.Nsenter == 0 {
				t.Error("nsenter --net=/proc/1/ns/net succeeded inside")
			}
			if s.Bridge == 0 {
				t.Fatal("no bridge in the agent's namespace")
			}
			// Before its first connection the bridge holds the listener,
			// the agent's pidfd and /dev/null: nothing of the agent's.
			if got, want := strings.Join(s.BridgeFDs, " "), "0=/dev/null 1=/dev/null 2=/dev/null 3=socket 4=anon_inode:[pidfd] 5=socket"; got != want {
				t.Errorf("the bridge's fds %q, want %q", got, want)
			}
			waitGone(t, s.Bridge)
		})
	}
}

// waitGone waits for pid to exit, on its pidfd.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(testutil.Deadline/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("the bridge (pid %d) outlived the agent", pid)
		}
		return
	}
}

// A launch in a network namespace without filesystem rules hides the
// host's services' sockets it is given (--hide, which marshald gives
// HostServices): a socket hidden itself, as /run/systemd/private would
// be, and one in a hidden directory, as /run/user/UID/systemd/private
// would be, are out of the agent's reach, where the same launch without
// --hide reaches both; and nobody, root included, unmounts what hides
// them. With a bridge and without, as root and as an ordinary user.
func TestHiddenServicesAreOutOfReach(t *testing.T) {
	f := setup(t)
	dir, err := os.MkdirTemp(f.dir, "svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	manager := filepath.Join(dir, "manager")
	if err := os.Mkdir(manager, 0o755); err != nil {
		t.Fatal(err)
	}
	lone, inner := filepath.Join(dir, "private"), filepath.Join(manager, "private")
	for _, path := range []string{lone, inner} {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		os.Chmod(path, 0o777)
	}
	os.Chmod(dir, 0o755)
	env := []string{envServices + "=" + lone + "," + inner}
	networks := map[string][]string{"none": nil, "bridge": {"--socket", upstream(t, f.dir)}}
	for _, u := range users(t) {
		for _, network := range []string{"none", "bridge"} {
			t.Run(u.name+"_network_"+network, func(t *testing.T) {
				if open := runAgent(t, f, u.cred, env, networks[network]...); !slices.Equal(open.Services, []string{"", ""}) {
					t.Fatalf("without --hide the agent connected to the services with errors %q, want both connected", open.Services)
				}
				s := runAgent(t, f, u.cred, env, append(slices.Clone(networks[network]), "--hide", lone, "--hide", manager)...)
				if len(s.Services) != 2 || s.Services[0] == "" || s.Services[1] == "" {
					t.Errorf("with --hide the agent connected to the services with errors %q, want both refused", s.Services)
				}
				if len(s.Unmounts) > 0 {
					t.Errorf("the agent unmounted %q, which hid a service", s.Unmounts)
				}
			})
		}
	}
}

// Without a socket there is no bridge, and no way out at all.
func TestNoSocketNoBridge(t *testing.T) {
	f := setup(t)
	host, _ := resolvConf()
	s := runAgent(t, f, nil, []string{envBridge + "=127.0.0.1:3128"})
	if s.Bridge != 0 || !strings.Contains(s.Bridged, "connection refused") {
		t.Errorf("bridge pid %d, through it %q; want none, refused", s.Bridge, s.Bridged)
	}
	if strings.Join(s.Links, " ") != "lo" {
		t.Errorf("links inside %q, want only lo", s.Links)
	}
	if !slices.Equal(s.Nameservers, host) {
		t.Errorf("/etc/resolv.conf inside names %q, want the host's %q: there is no resolver", s.Nameservers, host)
	}
}

// Where no namespace can be made the launch is refused, says why, and
// runs nothing. A user namespace whose user.max_user_namespaces (or
// max_mnt_namespaces, which the resolver's /etc/resolv.conf needs) is 0
// stands for a host that forbids them; it limits only itself.
func TestRefusedWhereNamespacesCannotBeMade(t *testing.T) {
	f := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	socket := upstream(t, f.dir)
	noUserNS := `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`
	// The helper runs as an ordinary user in a user namespace below:
	// root's id map needs more ids than this one has.
	noMountNS := `echo 0 > /proc/sys/user/max_mnt_namespaces && exec unshare --user --map-user=1000 --map-group=1000 "$0" "$@"`
	for _, tc := range []struct {
		name   string
		script string
		args   []string
		want   string
	}{
		{"exec", noUserNS, []string{"exec", "--attempt", "0123", "--", "touch", marker},
			"ISOLATION_UNSUPPORTED: netns isolation unavailable: the user namespace limit is reached (user.max_user_namespaces) (errno 28)\nattempt 0123, process "},
		{"check", noUserNS, []string{"check"},
			"ISOLATION_UNSUPPORTED: netns isolation unavailable: the user namespace limit is reached"},
		{"resolver", noMountNS, []string{"exec", "--socket", socket, "--", "touch", marker},
			"ISOLATION_UNSUPPORTED: netns isolation unavailable: a mount and IPC namespace could not be made (errno 28)\n"},
		{"check resolver", noMountNS, []string{"check"},
			"ISOLATION_UNSUPPORTED: netns isolation unavailable: a mount and IPC namespace could not be made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("unshare", append([]string{"--user", "--map-root-user", "sh", "-c", tc.script, f.helper}, tc.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 78 {
				t.Fatalf("%v: %v, want exit status 78\n%s", cmd.Args, err, stderr.Bytes())
			}
			if !strings.HasPrefix(stderr.String(), tc.want) {
				t.Errorf("stderr %q, want it to start %q", stderr.String(), tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the program ran")
			}
		})
	}
}

// A program that cannot be executed is refused as marshalctl run refuses
// it, in text or as JSON.
func TestExecFailureIsARefusal(t *testing.T) {
	f := setup(t)
	cmd := exec.Command(f.helper, "exec", "--attempt", "00ff", "--", "/nonexistent/agent")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 70 {
		t.Fatalf("exec of a missing program: %v, want exit status 70", err)
	}
	want := fmt.Sprintf("INTERNAL: exec /nonexistent/agent: No such file or directory\nattempt 00ff, process %d, state cancelled; nothing was started\n", cmd.Process.Pid)
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}

	cmd = exec.Command(f.helper, "exec", "--output", "json", "--", "/nonexistent/agent")
	out, _ := cmd.Output()
	var r struct {
		Code, Detail, Attempt, State string
		Process                      int
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("-o json said %q: %v", out, err)
	}
	if r.Code != "INTERNAL" || r.Attempt != "" || r.State != "cancelled" || r.Process != cmd.Process.Pid {
		t.Errorf("refusal %+v", r)
	}
}

// The agent keeps the helper's pid, so its parent waits for it and gets
// its exit status, and its arguments are its own.
func TestTheAgentIsTheLaunchingProcess(t *testing.T) {
	f := setup(t)
	cmd := exec.Command(f.helper, "exec", "--socket", upstream(t, f.dir), "--argv0", "agent-name", "--",
		"/bin/sh", "-c", `echo "$$ $(tr '\0' '\n' < /proc/$$/cmdline | head -n 1) $0"; exit 7`, "zero")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit: %v, want status 7", err)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("%d agent-name zero", cmd.Process.Pid); got != want {
		t.Errorf("the agent said %q, want %q", got, want)
	}
}
