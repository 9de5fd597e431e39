//go:build !unix

package loader

import "os"

// openFile opens name for reading.
func openFile(name string, _ bool) (*os.File, error) {
	return os.Open(name)
}
