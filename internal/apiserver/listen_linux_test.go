package apiserver_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func dials(path string) bool {
	c, err := net.Dial("unix", path)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestListenModesIgnoreTheUmask(t *testing.T) {
	tests := []struct {
		name     string
		listen   func(string) (net.Listener, error)
		root     bool
		sockMode os.FileMode
		dirMode  os.FileMode
		gid      int
	}{
		{name: "owner_only", listen: apiserver.Listen, sockMode: 0o600, dirMode: 0o700, gid: os.Getegid()},
		{
			name:     "group",
			listen:   func(p string) (net.Listener, error) { return apiserver.ListenGroup(p, otherGroup) },
			root:     true,
			sockMode: 0o660, dirMode: 0o750, gid: otherGroup,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				testutil.RequireRoot(t)
			}
			socket := filepath.Join(testutil.ShortDir(t), "run", "marshal.sock")
			old := syscall.Umask(0)
			ln, err := tc.listen(socket)
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if got := mode(t, socket); got != os.ModeSocket|tc.sockMode {
				t.Errorf("socket mode %v, want %v", got, os.ModeSocket|tc.sockMode)
			}
			if got := mode(t, filepath.Dir(socket)); got != os.ModeDir|tc.dirMode {
				t.Errorf("directory mode %v, want %v", got, os.ModeDir|tc.dirMode)
			}
			for _, p := range []string{socket, filepath.Dir(socket)} {
				fi, _ := os.Lstat(p)
				if g := int(fi.Sys().(*syscall.Stat_t).Gid); g != tc.gid {
					t.Errorf("%s group %d, want %d", p, g, tc.gid)
				}
			}
			// Only the socket and its lock are left beside it.
			entries, _ := os.ReadDir(filepath.Dir(socket))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if len(names) != 2 || names[0] != "marshal.sock" || names[1] != "marshal.sock.lock" {
				t.Errorf("socket directory holds %q, want the socket and its lock", names)
			}
		})
	}
}

func TestListenExistingDirectoryKeepsItsMode(t *testing.T) {
	dir := testutil.ShortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := apiserver.Listen(filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := mode(t, dir); got != os.ModeDir|0o755 {
		t.Errorf("existing directory's mode became %v", got)
	}
}

func TestListenReplacesOnlyStaleSockets(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) (cleanup func())
		wantErr error
	}{
		{
			name: "stale_socket_replaced",
			prepare: func(t *testing.T, path string) func() {
				l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				l.SetUnlinkOnClose(false)
				l.Close()
				return func() {}
			},
		},
		{
			name: "live_socket_kept",
			prepare: func(t *testing.T, path string) func() {
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				return func() { l.Close() }
			},
			wantErr: apiserver.ErrInUse,
		},
		{
			name: "locked_by_a_running_daemon",
			prepare: func(t *testing.T, path string) func() {
				l, err := apiserver.Listen(path)
				if err != nil {
					t.Fatal(err)
				}
				return func() { l.Close() }
			},
			wantErr: apiserver.ErrInUse,
		},
		{
			name: "regular_file_kept",
			prepare: func(t *testing.T, path string) func() {
				if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
					t.Fatal(err)
				}
				return func() {}
			},
			wantErr: apiserver.ErrNotSocket,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(testutil.ShortDir(t), "marshal.sock")
			cleanup := tc.prepare(t, path)
			defer cleanup()
			before, _ := os.Lstat(path)
			ln, err := apiserver.Listen(path)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Listen = %v, want success", err)
				}
				defer ln.Close()
				if !dials(path) {
					t.Errorf("nothing answers on %s after Listen", path)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				if ln != nil {
					ln.Close()
				}
				t.Fatalf("Listen = %v, want %v", err, tc.wantErr)
			}
			after, serr := os.Lstat(path)
			if serr != nil || !os.SameFile(before, after) {
				t.Errorf("a refused Listen replaced %s", path)
			}
		})
	}
}

func TestListenerCloseRemovesOnlyItsOwnSocket(t *testing.T) {
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "marshal.sock")
	ln, err := apiserver.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after Close: %v", err)
	}

	// Released: the next daemon gets the path. Then another socket takes
	// its place, and closing the first listener leaves it alone.
	ln, err = apiserver.Listen(path)
	if err != nil {
		t.Fatalf("Listen after Close = %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ln.Close()
	if !dials(path) {
		t.Errorf("closing a listener removed the socket that replaced its own")
	}
}
