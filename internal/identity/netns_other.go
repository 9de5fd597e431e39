//go:build !linux

package identity

import (
	"errors"
	"os"
)

// SelfNetNS needs Linux.
func SelfNetNS() (NetNS, error) { return NetNS{}, errors.ErrUnsupported }

// OpenNetNS needs Linux.
func OpenNetNS(pidfd, pid int) (*os.File, NetNS, error) { return nil, NetNS{}, errors.ErrUnsupported }

// PidfdNetNS needs Linux.
func PidfdNetNS(pidfd, pid int) (NetNS, error) { return NetNS{}, errors.ErrUnsupported }
