package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs is a small file system of its own for one test, to fill up.
type Tmpfs struct {
	// Dir is where it is mounted: an empty directory, mode 0700.
	Dir string
}

// NewTmpfs mounts a tmpfs of size bytes on a new directory in
// t.TempDir() and unmounts it when t ends. It skips t unless it runs as
// root.
func NewTmpfs(t testing.TB, size int64) *Tmpfs {
	t.Helper()
	RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		// Detached, so that a file a failed test left open does not keep
		// it mounted.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return &Tmpfs{Dir: dir}
}

// Fill writes a file named name in the tmpfs until the file system has no
// space left, and returns its path. Remove the file to give the space
// back.
func (f *Tmpfs) Fill(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(f.Dir, name)
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := w.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", f.Dir, err)
			}
			break
		}
	}
	// What a 64 KiB write could not take, a page may still.
	for {
		if _, err := w.Write(buf[:512]); err != nil {
			break
		}
	}
	return path
}

// Free reports the bytes available in the tmpfs.
func (f *Tmpfs) Free(t testing.TB) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(f.Dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
