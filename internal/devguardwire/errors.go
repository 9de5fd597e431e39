package devguardwire

import "errors"

// Errors of the transport and the decoder. Each ends the session without
// an answer, as DevGuard's server does.
var (
	// ErrFrameSize is returned for a frame whose length is 0 or more than
	// MaxFrameBytes.
	ErrFrameSize = errors.New("devguardwire: frame size out of bounds")
	// ErrMalformed is returned for a frame that is not a request of
	// protocol 1: not JSON, an unknown or repeated field, a missing one,
	// an unknown method or enumeration, a secret that is not 64 lowercase
	// hex digits.
	ErrMalformed = errors.New("devguardwire: malformed request")
)

// ErrUnexpected is returned for an answer a client cannot take: of
// another version or request, malformed, or of a result not asked for.
var ErrUnexpected = errors.New("devguardwire: unexpected answer")

// ErrRefused wraps an error answer: its Code is the authority's.
type ErrRefused struct{ Code Code }

func (e *ErrRefused) Error() string { return "devguard authority refused: " + string(e.Code) }
