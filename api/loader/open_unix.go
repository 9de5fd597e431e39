//go:build unix

package loader

import (
	"os"
	"syscall"
)

// openFile opens name for reading without blocking on a FIFO or device
// that carries a manifest's name; the caller checks that it is a regular
// file. With noFollow, a symlink swapped in after the directory was listed
// fails to open instead of being followed out of the config directory.
func openFile(name string, noFollow bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	return os.OpenFile(name, flags, 0)
}
