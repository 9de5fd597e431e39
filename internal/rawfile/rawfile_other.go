//go:build !linux

package rawfile

import (
	"io"
	"os"
)

// Read returns the content of the file at path.
func Read(path string) ([]byte, error) { return os.ReadFile(path) }

// ReadFD reads the file open at fd, named path in errors, to its end.
func ReadFD(fd int, path string) ([]byte, error) {
	return io.ReadAll(os.NewFile(uintptr(fd), path))
}

// Write writes data to the file at path, opened with flag and, when flag
// creates it, perm, in one write.
func Write(path string, data []byte, flag int, perm uint32) error {
	f, err := os.OpenFile(path, flag, os.FileMode(perm))
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}
