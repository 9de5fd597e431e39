package egress

import (
	"errors"

	"github.com/marshal-dev/marshal/internal/peer"
)

var (
	// ErrUnsupportedListener is returned when the proxy is given a
	// listener whose connections are neither TCP nor unix stream
	// sockets: it could not identify their peers.
	ErrUnsupportedListener = peer.ErrUnsupportedListener
	// ErrNotLoopback is returned by ListenTCP for an address that is not
	// a loopback IP address: peers are identified by the kernel's
	// knowledge of local sockets, so the proxy serves this host only.
	ErrNotLoopback = errors.New("egress: the proxy listens on loopback addresses only")
	// ErrInvalidOptions is returned by New when a required option is
	// missing.
	ErrInvalidOptions = errors.New("egress: invalid options")
)
