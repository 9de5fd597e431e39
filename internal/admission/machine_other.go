//go:build !linux

package admission

import (
	"fmt"
	"runtime"
)

// MeasureMachine is not supported on this platform: declare the Host's
// capacity.
func MeasureMachine() (Machine, error) {
	return Machine{}, fmt.Errorf("measuring capacity on %s: %w", runtime.GOOS, ErrUnavailable)
}
