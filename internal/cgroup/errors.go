package cgroup

import "errors"

var (
	// ErrNotFound is returned when a scope or slice does not exist.
	ErrNotFound = errors.New("cgroup: not found")
	// ErrExists is returned by CreateScope when the scope already exists.
	ErrExists = errors.New("cgroup: already exists")
	// ErrBusy is returned when removing a group that still holds processes
	// or child groups.
	ErrBusy = errors.New("cgroup: busy")
	// ErrNoProcess is returned when the process to move is gone.
	ErrNoProcess = errors.New("cgroup: no such process")
	// ErrUnavailable is returned when the backend cannot work on this host;
	// the wrapping error names what is missing.
	ErrUnavailable = errors.New("cgroup: backend unavailable")
)
