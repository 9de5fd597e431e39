package identity

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// NotReaped returns nil while the process of pidfd has not been reaped
// (alive, or a zombie: either way its pid is still its own), and an error
// wrapping ErrNoProcess once it has. A process read by its pid and found
// not reaped after the read was the one the pidfd holds.
func NotReaped(pidfd int) error {
	err := unix.PidfdSendSignal(pidfd, 0, nil, 0)
	switch {
	case err == nil, errors.Is(err, unix.EPERM):
		// EPERM: it exists, and belongs to a user this process may not
		// signal.
		return nil
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("exited while resolving: %w", ErrNoProcess)
	default:
		return fmt.Errorf("checking pidfd: %w", err)
	}
}
