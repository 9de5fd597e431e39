//go:build !linux

package admission

import (
	"fmt"
	"runtime"
	"time"
)

// MeasureMachine is not supported on this platform: declare the Host's
// capacity.
func MeasureMachine() (Machine, error) {
	return Machine{}, fmt.Errorf("measuring capacity on %s: %w", runtime.GOOS, ErrUnavailable)
}

// started stands in for the boot on a platform without CLOCK_BOOTTIME.
var started = time.Now()

// bootUptime is the time since this process started: consumers' records
// tell time from an origin of their own there.
func bootUptime() time.Duration { return time.Since(started) }
