//go:build !linux

package admission

import "os"

// freeBytes cannot read free space on this platform.
func freeBytes(string) (int64, bool) { return 0, false }

// datasync writes f to stable storage.
func datasync(f *os.File) error { return f.Sync() }
