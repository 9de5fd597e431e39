package isolation

import "errors"

// ErrUnavailable is wrapped by every error that says an isolation a
// launch needs (netns isolation, filesystem confinement) cannot be had
// here; an *UnavailableError says which and why.
var ErrUnavailable = errors.New("isolation unavailable")

// The isolations an UnavailableError names.
const (
	WhatNetns      = "netns isolation"
	WhatFilesystem = "filesystem confinement"
)

// UnavailableError says why an isolation cannot be had: What is WhatNetns
// or WhatFilesystem, Reason a fixed phrase, naming the setting when one is
// the cause.
type UnavailableError struct {
	What   string
	Reason string
}

func (e *UnavailableError) Error() string { return e.what() + " unavailable: " + e.Reason }

func (e *UnavailableError) what() string {
	if e.What == "" {
		return WhatNetns
	}
	return e.What
}

func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

func unavailable(reason string) error { return &UnavailableError{What: WhatNetns, Reason: reason} }

func fsUnavailable(reason string) error {
	return &UnavailableError{What: WhatFilesystem, Reason: reason}
}
