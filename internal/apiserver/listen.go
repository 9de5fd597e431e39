package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// staleProbeTimeout bounds the dial that tells a live socket from a stale
// one.
const staleProbeTimeout = 2 * time.Second

// Listen creates the local API's unix socket at path, mode 0600, so only
// its owner (and root) can connect. A missing parent directory is created
// with mode 0700. Whatever the umask, the socket never appears at path
// with a looser mode: it is bound in a private directory, given its mode,
// then renamed into place.
//
// A socket file left at path by a daemon that is gone is replaced. When a
// process answers on it, or holds the lock beside it (path + ".lock"),
// Listen fails with ErrInUse; when path is not a socket, with
// ErrNotSocket. Closing the listener removes the socket, unless another
// one has taken its place since, and the lock.
func Listen(path string) (net.Listener, error) {
	return listen(path, 0o600, 0o700, -1)
}

// ListenGroup is Listen for a daemon that also serves the members of
// group gid (Options.AllowGID): the socket is mode 0660 and belongs to
// gid, and a missing parent directory is created with mode 0750 and
// belongs to gid, so the kernel lets the members connect.
func ListenGroup(path string, gid int) (net.Listener, error) {
	if gid < 0 {
		return nil, fmt.Errorf("socket group %d: not a group id", gid)
	}
	return listen(path, 0o660, 0o750, gid)
}

func listen(path string, mode, dirMode fs.FileMode, gid int) (_ net.Listener, err error) {
	path = filepath.Clean(path)
	dir := filepath.Dir(path)
	if err := makeSocketDir(dir, dirMode, gid); err != nil {
		return nil, err
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	if err := checkStale(path); err != nil {
		return nil, err
	}
	ln, err := bindPrivately(dir, path, mode, gid)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return &socketListener{UnixListener: ln, path: path, created: fi, lock: lock}, nil
}

// makeSocketDir creates dir with mode when it is missing; an existing
// directory is left as it is.
func makeSocketDir(dir string, mode fs.FileMode, gid int) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("socket directory %s: not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("creating socket directory: %w", err)
	}
	// MkdirAll's mode is filtered by the umask; this one is not.
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(dir, -1, gid); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
	}
	return nil
}

// checkStale returns nil when nothing is at path or a socket is there
// that no one answers on.
func checkStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is %w; move it away or choose another socket path", path, ErrNotSocket)
	}
	conn, err := net.DialTimeout("unix", path, staleProbeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s: %w; is marshald already running? stop it first, or choose another socket path", path, ErrInUse)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil // stale: the rename into place replaces it
	}
	return fmt.Errorf("probing the socket left at %s: %w", path, err)
}

// bindPrivately binds a socket inside a fresh mode-0700 directory next to
// path, where no one else can reach it, sets its mode and group, and
// renames it to path.
func bindPrivately(dir, path string, mode fs.FileMode, gid int) (*net.UnixListener, error) {
	var b [3]byte
	rand.Read(b[:])
	private := filepath.Join(dir, "."+hex.EncodeToString(b[:]))
	if err := os.Mkdir(private, 0o700); err != nil {
		return nil, fmt.Errorf("creating the socket: %w", err)
	}
	defer os.Remove(private)
	if err := os.Chmod(private, 0o700); err != nil {
		return nil, fmt.Errorf("creating the socket: %w", err)
	}
	tmp := filepath.Join(private, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("creating the socket: %w", err)
	}
	// The listener's own unlink would name the private path; Close of
	// socketListener removes the real one.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("creating the socket %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(err)
	}
	if gid >= 0 {
		if err := os.Chown(tmp, -1, gid); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return ln, nil
}

// socketListener removes its socket and releases its lock when closed.
type socketListener struct {
	*net.UnixListener
	path    string
	created fs.FileInfo
	lock    *os.File
	once    sync.Once
}

func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		// Only the socket this listener made: a daemon started since may
		// have replaced it. The lock file goes while still held, and a
		// daemon that locked it meanwhile sees it gone (lockFile).
		if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.created) {
			os.Remove(l.path)
		}
		unlockFile(l.lock, l.path+".lock")
	})
	return err
}
