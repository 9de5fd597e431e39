package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

var (
	// ErrUnreachable is matched (errors.Is) by every *UnreachableError:
	// no daemon answers on the socket.
	ErrUnreachable = errors.New("marshald not reachable")
	// ErrStreamEnded is returned by Watch and WatchEvents when the daemon
	// ends a stream that the caller did not cancel: it stopped.
	ErrStreamEnded = errors.New("marshald ended the stream")
	// ErrBadResponse is wrapped by the error of an answer that is not
	// HTTP/1.x as this client reads it: a malformed status line, header
	// or chunk, a transfer encoding other than chunked, a trailer, or a
	// status line and headers over 64 KiB.
	ErrBadResponse = errors.New("malformed answer from marshald")
)

// UnreachableError is returned when the socket cannot be connected to. Its
// message names the socket and says what to do.
type UnreachableError struct {
	// Socket is the path dialed.
	Socket string
	// Err is the dial's error.
	Err error
}

func (e *UnreachableError) Error() string {
	switch {
	case errors.Is(e.Err, fs.ErrPermission):
		return fmt.Sprintf("cannot connect to marshald at %s: permission denied; "+
			"marshald serves its own user and root: run marshalctl as that user, "+
			"or point --socket or $MARSHAL_SOCKET at your own marshald", e.Socket)
	case errors.Is(e.Err, fs.ErrNotExist), errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("marshald is not running at %s (%v); start it with %s, "+
			"or point --socket or $MARSHAL_SOCKET at the socket it listens on", e.Socket, shortErr(e.Err), startHint())
	}
	return fmt.Sprintf("cannot connect to marshald at %s: %v; is marshald running? start it with %s, "+
		"or point --socket or $MARSHAL_SOCKET at its socket", e.Socket, shortErr(e.Err), startHint())
}

// startHint says how this user starts marshald.
func startHint() string {
	if os.Geteuid() == 0 {
		return "`marshald` (or `systemctl start marshald`)"
	}
	return "`marshald` (or `systemctl --user start marshald`)"
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Is makes errors.Is(e, ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// shortErr is the innermost error's message: "no such file or directory"
// rather than the whole dial chain.
func shortErr(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
