package peer

import "errors"

// ErrUnsupportedListener is returned by Identifier.Identify for a
// connection that is neither TCP nor a unix socket: nothing says who its
// peer is.
var ErrUnsupportedListener = errors.New("peer: connections of this kind cannot be identified")
