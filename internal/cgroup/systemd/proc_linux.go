package systemd

import (
	"errors"

	"golang.org/x/sys/unix"
)

// processExists reports whether process pid exists (a zombie counts).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
