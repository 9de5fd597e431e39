// Package cgroup is the contract between marshal and the host's cgroup
// tree: the Backend interface that the profile, agent and launch code use,
// the types it speaks in, and the low-level pieces its implementations
// share (finding the cgroup2 mount, reading and writing interface files).
//
// The implementations live in subpackages: cgroupfs writes the tree
// directly, systemd asks a systemd manager over D-Bus. Neither trusts that a
// limit took effect; both read it back and report what was achieved.
package cgroup
