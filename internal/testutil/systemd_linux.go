package testutil

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

// systemdBinary is the manager the script execs.
const systemdBinary = "/usr/lib/systemd/systemd"

// managerScript is the script that enters the namespace and execs the
// manager, relative to the module root.
const managerScript = "test/systemd-user-manager.sh"

// systemdBusName is the name the manager owns on its bus once it serves
// requests there.
const systemdBusName = "org.freedesktop.systemd1"

// UserManager is a throwaway systemd user manager for tests: its own root
// cgroup, runtime directory, bus and mount namespace, all removed by Stop.
// Connect to it with Env (or Setenv); it is reachable from the test
// process although it runs in another mount namespace, because its
// sockets live in RuntimeDir, a plain directory of the shared /tmp.
type UserManager struct {
	// RuntimeDir is the manager's XDG_RUNTIME_DIR, a private 0700
	// directory in a temporary directory of its own.
	RuntimeDir string
	// BusAddress is the address of the manager's bus, the value for
	// DBUS_SESSION_BUS_ADDRESS.
	BusAddress string
	// PrivateSocket is the manager's direct (peer-to-peer) socket,
	// RuntimeDir/systemd/private.
	PrivateSocket string
	// PID is the manager's process ID.
	PID int
	// Cgroup is the manager's root group relative to every hierarchy it
	// runs in, such as "/marshal-test-um-3f9a0c1e5b7d"; the manager puts
	// its units below it.
	Cgroup string
	// CgroupDirs are the absolute directories of that group: the cgroup2
	// one first, then the name=systemd one on a hybrid host.
	CgroupDirs []string

	dir    string // holds RuntimeDir and the manager's log
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{} // closed once cmd.Wait returned

	stopOnce sync.Once
	stopErr  error
}

// Env returns the environment that points a client at the manager:
// XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS.
func (m *UserManager) Env() []string {
	return []string{
		"XDG_RUNTIME_DIR=" + m.RuntimeDir,
		"DBUS_SESSION_BUS_ADDRESS=" + m.BusAddress,
	}
}

// Setenv sets Env in the test's environment for the duration of t.
func (m *UserManager) Setenv(t testing.TB) {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", m.RuntimeDir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", m.BusAddress)
}

// StartUserManager starts a throwaway systemd user manager with unique
// names, waits until it serves requests on its bus, and returns it. The
// caller must Stop it. It takes no *testing.T so that TestMain can use it;
// it returns an error wrapping ErrNoUserManager when the host cannot run
// one.
func StartUserManager() (*UserManager, error) {
	script, err := checkUserManagerHost()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroup.ReadMounts()
	if err != nil {
		return nil, err
	}
	if mounts.V2 == "" {
		return nil, fmt.Errorf("%w: needs a cgroup2 mount", ErrNoUserManager)
	}

	var b [6]byte
	rand.Read(b[:])
	name := "marshal-test-um-" + hex.EncodeToString(b[:])
	m := &UserManager{Cgroup: "/" + name, exited: make(chan struct{})}

	// The manager needs its own group in every hierarchy it tracks
	// processes in: cgroup2 and, on a hybrid host, name=systemd.
	hierarchies := []string{mounts.V2}
	if v1, ok := mounts.V1["name=systemd"]; ok {
		hierarchies = append(hierarchies, v1)
	}
	for _, mnt := range hierarchies {
		dir := filepath.Join(mnt, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			m.Stop()
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
				return nil, fmt.Errorf("%w: cgroup %s not writable: %v", ErrNoUserManager, mnt, err)
			}
			return nil, fmt.Errorf("creating the manager's cgroup: %w", err)
		}
		m.CgroupDirs = append(m.CgroupDirs, dir)
	}

	if m.dir, err = os.MkdirTemp("", name+"-"); err != nil { // 0700
		m.Stop()
		return nil, fmt.Errorf("creating the manager's temp dir: %w", err)
	}
	m.RuntimeDir = filepath.Join(m.dir, "runtime")
	if err := os.Mkdir(m.RuntimeDir, 0o700); err != nil {
		m.Stop()
		return nil, fmt.Errorf("creating the manager's runtime dir: %w", err)
	}
	m.BusAddress = "unix:path=" + filepath.Join(m.RuntimeDir, "bus")
	m.PrivateSocket = filepath.Join(m.RuntimeDir, "systemd", "private")
	if m.log, err = os.Create(filepath.Join(m.dir, "manager.log")); err != nil {
		m.Stop()
		return nil, fmt.Errorf("creating the manager's log: %w", err)
	}

	// Through sh, so that the script need not be executable in the
	// checkout; it execs, so the manager keeps the pid Start returns.
	args := append([]string{script, m.RuntimeDir, name + ".target"}, m.CgroupDirs...)
	m.cmd = exec.Command("/bin/sh", args...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	// If the test binary dies without Stop, the manager goes with it
	// instead of running on unowned.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		m.Stop()
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	m.PID = m.cmd.Process.Pid
	go func() {
		m.cmd.Wait()
		close(m.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	if err := m.waitSockets(ctx); err != nil {
		return nil, m.failStart(err)
	}
	if err := m.waitBusName(ctx); err != nil {
		return nil, m.failStart(err)
	}
	return m, nil
}

// checkUserManagerHost returns the script's path, or why this host cannot
// run a user manager.
func checkUserManagerHost() (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: needs root", ErrNoUserManager)
	}
	if _, err := os.Stat(systemdBinary); err != nil {
		return "", fmt.Errorf("%w: no systemd: %v", ErrNoUserManager, err)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return "", fmt.Errorf("%w: no unshare: %v", ErrNoUserManager, err)
	}
	// The manager's tmpfs is mounted over it in the new namespace; it is
	// never created, since that would change the shared /run.
	if fi, err := os.Stat("/run/systemd"); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: no /run/systemd directory to mount a tmpfs on", ErrNoUserManager)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, managerScript)
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("testutil: the user manager script: %w", err)
	}
	return script, nil
}

// moduleRoot finds the directory holding go.mod above the working
// directory, which for a test is its package directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testutil: no go.mod above the working directory")
		}
		dir = parent
	}
}

// failStart stops a manager that did not come up and returns err with the
// manager's log.
func (m *UserManager) failStart(err error) error {
	log, _ := os.ReadFile(m.log.Name())
	if stopErr := m.Stop(); stopErr != nil {
		err = errors.Join(err, stopErr)
	}
	return fmt.Errorf("starting systemd user manager: %w; its log:\n%s", err, bytes.TrimSpace(log))
}

// waitSockets waits until the manager has created its private socket and
// its bus socket, or has exited, or ctx ends. It waits on inotify events
// of the runtime directory and of its systemd subdirectory, and on a pidfd
// of the manager.
func (m *UserManager) waitSockets(ctx context.Context) error {
	ino, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer unix.Close(ino)
	pidfd, err := unix.PidfdOpen(m.PID, 0)
	if err != nil {
		return fmt.Errorf("pidfd of the manager: %w", err)
	}
	defer unix.Close(pidfd)

	const mask = unix.IN_CREATE | unix.IN_MOVED_TO
	if _, err := unix.InotifyAddWatch(ino, m.RuntimeDir, mask); err != nil {
		return fmt.Errorf("watching %s: %w", m.RuntimeDir, err)
	}
	bus := filepath.Join(m.RuntimeDir, "bus")
	systemdDir := filepath.Dir(m.PrivateSocket)
	watchingSystemdDir := false
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		// Watch the subdirectory once it exists, then look: what was
		// created before the watch is seen by the Stat calls.
		if !watchingSystemdDir {
			if _, err := unix.InotifyAddWatch(ino, systemdDir, mask); err == nil {
				watchingSystemdDir = true
			} else if !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("watching %s: %w", systemdDir, err)
			}
		}
		if isSocket(bus) && isSocket(m.PrivateSocket) {
			return nil
		}
		timeout := -1
		if deadline, ok := ctx.Deadline(); ok {
			timeout = max(int(time.Until(deadline).Milliseconds()), 0)
		}
		fds := []unix.PollFd{{Fd: int32(ino), Events: unix.POLLIN}, {Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll: %w", err)
		}
		if n == 0 && err == nil {
			return fmt.Errorf("no %s and %s after %v", bus, m.PrivateSocket, Deadline)
		}
		if fds[1].Revents != 0 {
			return errors.New("the manager exited before creating its sockets")
		}
		if fds[0].Revents != 0 {
			// The events only wake the loop; the Stat calls decide.
			if _, err := unix.Read(ino, buf); err != nil && !errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("reading inotify: %w", err)
			}
		}
	}
}

// dialBus connects to the manager's bus. systemd binds the socket before
// it listens on it, so a connection in between is refused: that one answer
// is retried, briefly, until ctx ends.
func (m *UserManager) dialBus(ctx context.Context) (*dbus.Conn, error) {
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		conn, err := dbus.Dial(m.BusAddress)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-m.exited:
			return nil, err
		case <-time.After(wait):
		}
	}
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}

// waitBusName waits until the manager owns its name on its bus. The bus
// daemon is socket-activated: the first connection starts it, and the
// manager joins the bus only once it runs, so a client that called the
// manager right after the socket appeared could find nobody there.
func (m *UserManager) waitBusName(ctx context.Context) error {
	conn, err := m.dialBus(ctx)
	if err != nil {
		return fmt.Errorf("dialing %s: %w", m.BusAddress, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		return fmt.Errorf("authenticating on %s: %w", m.BusAddress, err)
	}
	if err := conn.Hello(); err != nil {
		return fmt.Errorf("hello on %s: %w", m.BusAddress, err)
	}
	signals := make(chan *dbus.Signal, 8)
	conn.Signal(signals)
	if err := conn.AddMatchSignalContext(ctx,
		dbus.WithMatchSender("org.freedesktop.DBus"),
		dbus.WithMatchInterface("org.freedesktop.DBus"),
		dbus.WithMatchMember("NameOwnerChanged"),
		dbus.WithMatchArg(0, systemdBusName),
	); err != nil {
		return fmt.Errorf("watching %s on the bus: %w", systemdBusName, err)
	}
	for {
		var owned bool
		err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, systemdBusName).Store(&owned)
		if err != nil {
			return fmt.Errorf("asking the bus for %s: %w", systemdBusName, err)
		}
		if owned {
			return nil
		}
		select {
		case _, ok := <-signals:
			if !ok {
				return fmt.Errorf("bus connection closed waiting for %s: %w", systemdBusName, context.Cause(ctx))
			}
		case <-m.exited:
			return fmt.Errorf("the manager exited before joining its bus")
		case <-ctx.Done():
			return fmt.Errorf("%s not on the bus after %v", systemdBusName, Deadline)
		}
	}
}

// Stop stops the manager with SIGTERM and waits for it, then kills
// whatever is left in its cgroup and removes its groups and its runtime
// directory. It leaves no process, group, mount or file behind: the
// manager's tmpfs lived only in its mount namespace, which ends with its
// last process. Stop is safe to call more than once.
func (m *UserManager) Stop() error {
	m.stopOnce.Do(func() { m.stopErr = m.stop() })
	return m.stopErr
}

func (m *UserManager) stop() error {
	var errs []error
	if m.cmd != nil && m.cmd.Process != nil {
		m.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(Deadline)
		select {
		case <-m.exited:
		case <-timer.C:
			errs = append(errs, fmt.Errorf("manager %d still running %v after SIGTERM; killing it", m.PID, Deadline))
			m.cmd.Process.Kill()
			<-m.exited
		}
		timer.Stop()
	}
	// The manager's children (the bus daemon, test scopes) may outlive
	// it; removeTree kills them before removing the groups.
	for _, dir := range m.CgroupDirs {
		if err := removeTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if m.log != nil {
		m.log.Close()
	}
	if m.dir != "" {
		if err := os.RemoveAll(m.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
