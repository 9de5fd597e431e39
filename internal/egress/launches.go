package egress

import "github.com/marshal-dev/marshal/internal/peer"

// Launch is what marshald recorded of one launch (see package peer).
type Launch = peer.Launch

// Launches is marshald's record of the launches it made and whose scopes
// live (see package peer).
type Launches = peer.Launches

// Transports a peer reaches the proxy over.
const (
	TransportTCP  = peer.TransportTCP
	TransportUnix = peer.TransportUnix
)

// Why a peer counts as no launch's, as the audit log writes it (see
// package peer).
const (
	UnscopedNone        = peer.UnscopedNone
	UnscopedNotLaunched = peer.UnscopedNotLaunched
	UnscopedUnknown     = peer.UnscopedUnknown
	UnscopedOtherNetNS  = peer.UnscopedOtherNetNS
)
