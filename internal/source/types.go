package source

import (
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/internal/intake"
)

// KindConfigDir is the kind of the key that events about the config
// directory itself are recorded against.
const KindConfigDir = "ConfigDir"

// Options configure a Source.
type Options struct {
	// Dir is the config directory. It may be a symlink, may not exist yet,
	// and may be swapped for another directory while watched.
	Dir string
	// Sink receives the declarations. Required.
	Sink intake.Sink
	// Store persists last good objects. Optional.
	Store intake.Store
	// Recorder records events. Optional.
	Recorder intake.Recorder
	// Logger logs. Optional.
	Logger *slog.Logger
	// Clock drives the debounce and relist timers. Default: the real clock.
	Clock clock.WithTicker
	// Debounce is how long a change that may still be under way (a file
	// written in place and not closed, a file removed) must be quiet
	// before it is looked at. A complete change is looked at at once.
	// Default 10ms.
	Debounce time.Duration
	// Settle is how long a file that was emptied in place is given to be
	// written again before its emptiness is believed. Default 200ms.
	Settle time.Duration
	// Relist is the interval of the stat-level relist that catches what
	// events missed. Default 60s; negative disables it.
	Relist time.Duration
}
