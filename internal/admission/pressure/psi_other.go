//go:build !linux

package pressure

import (
	"context"
	"fmt"
	"runtime"
)

// HostSampler reads the host's signals; only Linux is supported.
type HostSampler struct {
	StateDir, MemoryPSI, CPUPSI, Meminfo string
}

// NewHostSampler returns a sampler that fails on this platform.
func NewHostSampler(stateDir, cgroup2 string) *HostSampler {
	return &HostSampler{StateDir: stateDir}
}

// Sample returns ErrNoSignal: pressure signals are read on Linux only.
func (h *HostSampler) Sample(context.Context) (Sample, error) {
	return Sample{}, fmt.Errorf("%s: %w", runtime.GOOS, ErrNoSignal)
}

// TriggerSpec is one PSI trigger; PSI exists on Linux only.
type TriggerSpec struct {
	Files             []string
	Kind              string
	Threshold, Window int64
}

// DefaultTriggerSpecs returns none on this platform.
func DefaultTriggerSpecs(string) []TriggerSpec { return nil }

// PSITriggers is never opened on this platform.
type PSITriggers struct{ Accepted []string }

// OpenTriggers returns ErrTriggersUnsupported.
func OpenTriggers([]TriggerSpec) (*PSITriggers, error) {
	return nil, fmt.Errorf("%s: %w", runtime.GOOS, ErrTriggersUnsupported)
}

// Close does nothing.
func (t *PSITriggers) Close() error { return nil }

// Run returns ErrTriggersUnsupported.
func (t *PSITriggers) Run(context.Context, chan<- struct{}) error {
	return ErrTriggersUnsupported
}

// NewHostMonitor returns a monitor whose sampler fails: admission stays
// closed on this platform unless capacity pressure is not monitored.
func NewHostMonitor(stateDir, cgroup2 string, onLevel func(from, to Status)) *Monitor {
	return NewMonitor(MonitorConfig{Sampler: NewHostSampler(stateDir, cgroup2), OnLevel: onLevel})
}
