package pressure

import "errors"

var (
	// ErrInvalidSample is returned by Controller.Observe when a sample is
	// stale, from the future, replayed, not later than the previous one,
	// or holds impossible values. Admission closes until valid samples
	// recover it.
	ErrInvalidSample = errors.New("pressure: invalid sample")
	// ErrNoSignal is returned by a Sampler when a required signal cannot
	// be read; the wrapping error names it.
	ErrNoSignal = errors.New("pressure: signal unavailable")
	// ErrTriggersUnsupported is returned when the kernel accepts no PSI
	// trigger on any candidate file; the monitor then samples on a timer.
	ErrTriggersUnsupported = errors.New("pressure: PSI triggers unsupported")
)
