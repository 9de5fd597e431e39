package localapi

import "errors"

// ErrNoRuntimeDir is returned by DefaultSocket for a user without
// XDG_RUNTIME_DIR, where the user-mode socket lives.
var ErrNoRuntimeDir = errors.New("XDG_RUNTIME_DIR is not set")
