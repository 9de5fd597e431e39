package isolation

import "errors"

// ErrUnavailable is wrapped by every error that says netns isolation
// cannot be had here; an *UnavailableError says why.
var ErrUnavailable = errors.New("netns isolation unavailable")

// UnavailableError says why netns isolation cannot be had: Reason is a
// fixed phrase, naming the setting when one is the cause.
type UnavailableError struct {
	Reason string
}

func (e *UnavailableError) Error() string { return ErrUnavailable.Error() + ": " + e.Reason }

func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

func unavailable(reason string) error { return &UnavailableError{Reason: reason} }
