//go:build !linux

package admission

import (
	"fmt"
	"runtime"
)

// Procfs is the Inspector of the running kernel; only Linux has one.
type Procfs struct {
	Root string
}

// BootID fails on this platform.
func (Procfs) BootID() (string, error) {
	return "", fmt.Errorf("boot ID on %s: %w", runtime.GOOS, ErrUnavailable)
}

// StartTime fails on this platform.
func (Procfs) StartTime(int) (uint64, error) {
	return 0, fmt.Errorf("process start time on %s: %w", runtime.GOOS, ErrUnavailable)
}
