package testutil

import "errors"

// ErrNoUserManager is returned, wrapped with the reason, by
// StartUserManager when this host cannot run a throwaway systemd user
// manager: not root, no systemd or unshare binary, no /run/systemd, no
// writable cgroup2 mount. Tests skip on it; any other error from StartUserManager is a
// failure.
var ErrNoUserManager = errors.New("testutil: no throwaway systemd user manager on this host")
