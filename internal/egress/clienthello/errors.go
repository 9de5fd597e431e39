package clienthello

import "errors"

var (
	// ErrNotTLS is returned when the first bytes are not a TLS handshake
	// record: the stream is another protocol.
	ErrNotTLS = errors.New("not a TLS handshake")
	// ErrMalformed is returned for a TLS handshake whose ClientHello does
	// not parse, or names the server ambiguously.
	ErrMalformed = errors.New("malformed ClientHello")
	// ErrTooLarge is returned when the ClientHello does not end within
	// the byte limit.
	ErrTooLarge = errors.New("ClientHello larger than the limit")
)
