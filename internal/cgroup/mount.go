package cgroup

import (
	"io"

	"github.com/marshal-dev/marshal/internal/cgroupmount"
)

// Mounts is where the cgroup hierarchies are mounted on this host.
type Mounts = cgroupmount.Mounts

// ReadMounts finds the cgroup mounts in /proc/self/mountinfo.
func ReadMounts() (Mounts, error) { return cgroupmount.Read() }

// ParseMountinfo reads mounts in the format of /proc/self/mountinfo.
func ParseMountinfo(r io.Reader) (Mounts, error) { return cgroupmount.Parse(r) }
