package controllers

import "errors"

var (
	// ErrInvalidSetup is returned by Setup when a store, the backend or
	// the recorder is missing or an option is negative; the wrapping
	// error says which.
	ErrInvalidSetup = errors.New("invalid controllers setup")
	// ErrAlreadyStarted is returned by Manager.Start when it was started
	// before. A Manager runs once.
	ErrAlreadyStarted = errors.New("controllers already started")
)
