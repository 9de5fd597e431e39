package detect

import "errors"

// ErrUnknownBackend is returned by Open when Options.Backend names no
// backend.
var ErrUnknownBackend = errors.New("detect: unknown cgroup backend")
