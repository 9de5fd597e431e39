package apiserver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloseLeavesNothingBehind: a stopped daemon's socket directory holds
// neither the socket nor its lock.
func TestCloseLeavesNothingBehind(t *testing.T) {
	dir, err := os.MkdirTemp("", "mapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "marshal.sock")
	for range 2 { // and the next daemon starts as the first did
		ln, err := Listen(socket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(socket); !errors.Is(err, ErrInUse) {
			t.Errorf("Listen while another listens = %v, want ErrInUse", err)
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("socket directory after Close holds %v, want nothing", entries)
		}
	}
}

// TestLockFileRetriesAnUnlinkedFile locks a lock file that its holder
// unlinked after it was opened: the lock is taken on the file path names
// now, and a second daemon is refused.
func TestLockFileRetriesAnUnlinkedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "marshal.sock.lock")
	first, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A starting daemon opened the lock file; then the first stops,
	// unlinking it, and a third daemon creates and locks a new one.
	stale, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	unlockFile(first, path)
	third, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	// The starting daemon's lock on the unlinked file succeeds, and must
	// not count: path names the third's file.
	if err := unix.Flock(int(stale.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("locking the unlinked file: %v", err)
	}
	if sameFile(stale, path) {
		t.Fatal("the unlinked file is still at its path; the test is wrong")
	}
	if _, err := lockFile(path); !errors.Is(err, ErrInUse) {
		t.Errorf("lockFile while the third daemon holds the lock = %v, want ErrInUse", err)
	}
}
