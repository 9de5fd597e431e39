package peer

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

	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// dialEnv, when set, makes the test binary a peer for the tests below: it
// waits for a line on stdin, dials the unix socket the variable names,
// and stays connected until stdin closes.
const dialEnv = "MARSHAL_PEER_TEST_DIAL"

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

func TestCredentialsOfSocketPairIsThisProcess(t *testing.T) {
	a, b := unixPair(t)
	for _, conn := range []*net.UnixConn{a, b} {
		if got, err := Credentials(conn); err != nil || got != self() {
			t.Errorf("Credentials(socketpair end) = %+v, %v, want %+v", got, err, self())
		}
	}
}

func TestCredentialsOverListenerIsThisProcess(t *testing.T) {
	path := filepath.Join(testutil.ShortDir(t), "s.sock")
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
		if got, err := Credentials(conn); err != nil || got != self() {
			t.Errorf("Credentials(%s end) = %+v, %v, want %+v", name, got, err, self())
		}
	}
	// This process is in no marshal scope: the credentials come back with
	// the refusal, for a caller that admits by uid.
	cred, id, err := identityOf(server)
	if !errors.Is(err, identity.ErrNotManaged) || cred != self() || id != (identity.Identity{}) {
		t.Errorf("identityOf(server end) = %+v, %+v, %v, want %+v and identity.ErrNotManaged", cred, id, err, self())
	}
}

// start starts cmd and kills and reaps it when t ends.
func start(t testing.TB, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
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
	socket := filepath.Join(testutil.ShortDir(t), "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := startPeer(t, socket)
	c.IsolateSystemdHierarchy(t, p.cmd.Process.Pid)
	testutil.MovePID(t, filepath.Join(c.Mounts.V2, sc.Path), p.cmd.Process.Pid)
	p.dial(t)
	return p, accept(t, l)
}

func TestIdentityOfProcessInScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	want := c.NewScope(t, "coder")
	p, conn := peerInScope(t, c, want)
	pid := p.cmd.Process.Pid

	cred, got, err := identityOf(conn)
	wantCred := Cred{PID: pid, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if wantID := (identity.Identity{Identity: want, PID: pid, Hierarchy: identity.Unified}); err != nil || cred != wantCred || got != wantID {
		t.Errorf("identityOf = %+v, %+v, %v, want %+v, %+v", cred, got, err, wantCred, wantID)
	}
}

func TestIdentityOfExitedPeer(t *testing.T) {
	socket := filepath.Join(testutil.ShortDir(t), "s.sock")
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
	if got, err := Credentials(conn); err != nil || got != wantCred {
		t.Errorf("Credentials after the peer exited = %+v, %v, want %+v", got, err, wantCred)
	}
	cred, id, err := identityOf(conn)
	if !errors.Is(err, identity.ErrNoProcess) || cred != wantCred || id != (identity.Identity{}) {
		t.Errorf("identityOf after the peer exited = %+v, %+v, %v, want %+v and identity.ErrNoProcess", cred, id, err, wantCred)
	}
}

// groupOf names the peer's own cgroup2 group by its id, the inode
// number of the group's directory, and its network namespace; a peer
// reaped since it connected is identity.ErrNoProcess.
func TestGroupOf(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	sc := c.NewScope(t, "coder")
	p, conn := peerInScope(t, c, sc)
	pid := p.cmd.Process.Pid
	dir := filepath.Join(c.Mounts.V2, sc.Path)

	cred, id, ns, err := groupOf(conn)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the kernel names no group for a pidfd (PIDFD_GET_INFO, Linux 6.13): %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	self, err2 := identity.SelfNetNS()
	if err2 != nil {
		t.Fatal(err2)
	}
	wantCred := Cred{PID: pid, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if err != nil || cred != wantCred || id != st.Ino || ns != self {
		t.Errorf("groupOf = %+v, %d, %v, %v; want %+v, %d (the scope's inode), %v", cred, id, ns, err, wantCred, st.Ino, self)
	}

	p.exit(t)
	if cred, _, _, err := groupOf(conn); !errors.Is(err, identity.ErrNoProcess) || cred != wantCred {
		t.Errorf("groupOf after the peer was reaped = %+v, %v; want %+v and identity.ErrNoProcess", cred, err, wantCred)
	}
}
