//go:build !linux

package rawfile

import "os"

// Read returns the content of the file at path.
func Read(path string) ([]byte, error) { return os.ReadFile(path) }

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
