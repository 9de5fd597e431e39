package apiserver

import "errors"

// Errors a Daemon returns, wrapped with context, for the server to answer
// with the matching localapi code. Any other error is answered 500
// INTERNAL with its message.
var (
	// ErrNotFound is returned when the object asked for does not exist.
	// Answered 404 NOT_FOUND.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is returned for a request the daemon refuses as it
	// stands, such as a malformed name. Answered 400 INVALID.
	ErrInvalid = errors.New("invalid request")
	// ErrConflict is returned when a request clashes with the current
	// state. Answered 409 CONFLICT.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable is returned when the daemon cannot answer yet or any
	// more: starting, stopping, or a part it needs is down. Answered 503
	// UNAVAILABLE.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotSupported is returned for what this daemon or host does not
	// do. Answered 501 NOT_SUPPORTED, as is errors.ErrUnsupported.
	ErrNotSupported = errors.New("not supported")
)

// Errors of Listen.
var (
	// ErrInUse is returned by Listen when another process answers on the
	// socket or holds its lock: a daemon is already running there.
	ErrInUse = errors.New("socket in use by a running daemon")
	// ErrNotSocket is returned by Listen when something other than a
	// socket exists at the socket's path; it is never removed.
	ErrNotSocket = errors.New("not a socket")
)
