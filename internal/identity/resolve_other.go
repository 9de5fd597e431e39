//go:build !linux

package identity

import (
	"errors"
	"fmt"
)

// Resolve returns the identity of process pid. Outside Linux there are no
// cgroups, so it always fails with errors.ErrUnsupported.
func Resolve(pid int) (Identity, error) {
	return Identity{}, fmt.Errorf("pid %d: resolving identity: %w", pid, errors.ErrUnsupported)
}
