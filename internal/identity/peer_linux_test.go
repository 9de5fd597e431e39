package identity

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// dialEnv, when set, makes the test binary a peer for the tests below: it
// waits for a line on stdin, dials the unix socket the variable names,
// and stays connected until stdin closes.
const dialEnv = "MARSHAL_IDENTITY_TEST_DIAL"

func TestMain(m *testing.M) {
	if path := os.Getenv(dialEnv); path != "" {
		os.Exit(dialAndWait(path))
	}
	os.Exit(m.Run())
}

func dialAndWait(path string) int {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer conn.Close()
	io.Copy(io.Discard, in)
	return 0
}

// unixPair returns both ends of a connected unix socket pair.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1]
}

func self() Cred {
	return Cred{PID: os.Getpid(), UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
}

func TestPeerOfSocketPairIsThisProcess(t *testing.T) {
	a, b := unixPair(t)
	for _, conn := range []*net.UnixConn{a, b} {
		if got, err := Peer(conn); err != nil || got != self() {
			t.Errorf("Peer(socketpair end) = %+v, %v, want %+v", got, err, self())
		}
	}
}

func TestPeerOverListenerIsThisProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := accept(t, l)

	for name, conn := range map[string]*net.UnixConn{"server": server, "client": client} {
		if got, err := Peer(conn); err != nil || got != self() {
			t.Errorf("Peer(%s end) = %+v, %v, want %+v", name, got, err, self())
		}
	}
	// This process is in no marshal scope: the credentials come back with
	// the refusal, for a caller that admits by uid.
	cred, id, err := PeerIdentity(server)
	if !errors.Is(err, ErrNotManaged) || cred != self() || id != (Identity{}) {
		t.Errorf("PeerIdentity(server end) = %+v, %+v, %v, want %+v and ErrNotManaged", cred, id, err, self())
	}
}

func accept(t *testing.T, l *net.UnixListener) *net.UnixConn {
	t.Helper()
	if err := l.SetDeadline(time.Now().Add(testutil.Deadline)); err != nil {
		t.Fatal(err)
	}
	conn, err := l.AcceptUnix()
	if err != nil {
		t.Fatalf("accepting the peer: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// peerProcess is a child of the test binary that connects to a listener
// when told to.
type peerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startPeer(t *testing.T, socket string) *peerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	cmd.Env = append(os.Environ(), dialEnv+"="+socket, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	start(t, cmd)
	return &peerProcess{cmd: cmd, stdin: stdin}
}

func (p *peerProcess) dial(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "dial\n"); err != nil {
		t.Fatal(err)
	}
}

// exit closes the peer's stdin and reaps it.
func (p *peerProcess) exit(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("peer: %v", err)
	}
}

// peerInScope starts a peer, moves it into scope sc of tree c and
// returns it and the connection it made.
func peerInScope(t *testing.T, c *testutil.CgroupTree, sc scope.Identity) (*peerProcess, *net.UnixConn) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := startPeer(t, socket)
	isolateSystemdHierarchy(t, c, p.cmd.Process.Pid)
	movePID(t, filepath.Join(c.Mounts.V2, sc.Path), p.cmd.Process.Pid)
	p.dial(t)
	return p, accept(t, l)
}

func TestPeerIdentityOfProcessInScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	want := newScope(t, c, "coder")
	p, conn := peerInScope(t, c, want)
	pid := p.cmd.Process.Pid

	cred, got, err := PeerIdentity(conn)
	wantCred := Cred{PID: pid, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if wantID := (Identity{Identity: want, PID: pid, Hierarchy: Unified}); err != nil || cred != wantCred || got != wantID {
		t.Errorf("PeerIdentity = %+v, %+v, %v, want %+v, %+v", cred, got, err, wantCred, wantID)
	}
}

func TestPeerIdentityOfExitedPeer(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	p := startPeer(t, socket)
	p.dial(t)
	conn := accept(t, l)
	p.exit(t)

	wantCred := Cred{PID: p.cmd.Process.Pid, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if got, err := Peer(conn); err != nil || got != wantCred {
		t.Errorf("Peer after the peer exited = %+v, %v, want %+v", got, err, wantCred)
	}
	cred, id, err := PeerIdentity(conn)
	if !errors.Is(err, ErrNoProcess) || cred != wantCred || id != (Identity{}) {
		t.Errorf("PeerIdentity after the peer exited = %+v, %+v, %v, want %+v and ErrNoProcess", cred, id, err, wantCred)
	}
}

func TestNotReaped(t *testing.T) {
	tests := []struct {
		name   string
		state  func(t *testing.T, cmd *exec.Cmd) // brings the started child into the state
		reaped bool
	}{
		{name: "running", state: func(*testing.T, *exec.Cmd) {}},
		{name: "zombie", state: func(t *testing.T, cmd *exec.Cmd) {
			// Killed, not reaped. Wait with WNOWAIT returns once it has
			// exited and leaves it a zombie.
			cmd.Process.Kill()
			var info unix.Siginfo
			if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "reaped", reaped: true, state: func(t *testing.T, cmd *exec.Cmd) {
			cmd.Process.Kill()
			cmd.Wait()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := start(t, exec.Command("sleep", "60"))
			pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pidfd)
			tc.state(t, cmd)
			err = notReaped(pidfd)
			if tc.reaped && !errors.Is(err, ErrNoProcess) || !tc.reaped && err != nil {
				t.Errorf("notReaped(pidfd of %s child) = %v, want reaped %v", tc.name, err, tc.reaped)
			}
		})
	}
}

// PeerGroup names the peer's own cgroup2 group by its id, the inode
// number of the group's directory, and its network namespace; a peer
// reaped since it connected is ErrNoProcess.
func TestPeerGroup(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	sc := newScope(t, c, "coder")
	p, conn := peerInScope(t, c, sc)
	pid := p.cmd.Process.Pid
	dir := filepath.Join(c.Mounts.V2, sc.Path)

	cred, id, ns, err := PeerGroup(conn)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the kernel names no group for a pidfd (PIDFD_GET_INFO, Linux 6.13): %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	self, err2 := SelfNetNS()
	if err2 != nil {
		t.Fatal(err2)
	}
	wantCred := Cred{PID: pid, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if err != nil || cred != wantCred || id != st.Ino || ns != self {
		t.Errorf("PeerGroup = %+v, %d, %v, %v; want %+v, %d (the scope's inode), %v", cred, id, ns, err, wantCred, st.Ino, self)
	}

	p.exit(t)
	if cred, _, _, err := PeerGroup(conn); !errors.Is(err, ErrNoProcess) || cred != wantCred {
		t.Errorf("PeerGroup after the peer was reaped = %+v, %v; want %+v and ErrNoProcess", cred, err, wantCred)
	}
}
