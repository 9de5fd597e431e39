package isolation

import (
	"errors"

	"golang.org/x/sys/unix"
)

// landlockABI asks the kernel for its Landlock ABI version.
func landlockABI() (int, error) {
	const version = 1 // LANDLOCK_CREATE_RULESET_VERSION
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, version)
	switch {
	case errno == 0:
		return int(v), nil
	case errors.Is(errno, unix.EOPNOTSUPP):
		return 0, fsUnavailable("Landlock is disabled in this kernel (add landlock to the lsm= boot parameter)")
	}
	return 0, fsUnavailable("this kernel has no Landlock (Linux 5.19 or later with CONFIG_SECURITY_LANDLOCK is needed)")
}
