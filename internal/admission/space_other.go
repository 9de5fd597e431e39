//go:build !linux

package admission

// freeBytes cannot read free space on this platform.
func freeBytes(string) (int64, bool) { return 0, false }
