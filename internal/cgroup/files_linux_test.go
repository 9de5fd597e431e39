package cgroup_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/rawfile"
)

// A group removed while one of its files is open reads ENODEV, which
// callers must take for the group gone, as a missing file: the tree
// watcher once stopped on it when a scope was removed mid-read.
func TestReadOfARemovedGroupIsNotFound(t *testing.T) {
	_, slice := newTree(t)
	dir := filepath.Join(slice, "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, cgroup.FileEvents)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := cgroup.RemoveGroup(cgroup.Host, dir); err != nil {
		t.Fatal(err)
	}
	_, err = rawfile.ReadFD(fd, path)
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, unix.ENODEV) {
		t.Fatalf("read after rmdir = %v, want an error that is fs.ErrNotExist and says ENODEV", err)
	}
}
