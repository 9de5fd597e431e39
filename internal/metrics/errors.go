package metrics

import "errors"

var (
	// ErrNotLoopback is returned by ListenTCP when the address could reach
	// beyond this host: an address of another interface, a name that does
	// not resolve only to loopback addresses, or no host at all (every
	// interface).
	ErrNotLoopback = errors.New("not a loopback address")
	// ErrInvalidOptions is returned by New when an option cannot work; the
	// wrapping error says which.
	ErrInvalidOptions = errors.New("invalid metrics options")
)
