package admission

import (
	"os"

	"golang.org/x/sys/unix"
)

// freeBytes returns the bytes an unprivileged writer may still use on the
// file system holding path, and false when that cannot be read.
func freeBytes(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize, true
}

// datasync writes f's data to stable storage, and its metadata only where
// reading the data back needs it.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
