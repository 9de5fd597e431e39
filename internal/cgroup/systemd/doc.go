// Package systemd is the cgroup.Backend that asks a systemd manager, the
// system's or a user's, over D-Bus: profile slices are transient slice
// units, launch scopes are transient scope units started with the
// launched process's pid, and scope events come from the manager's unit
// signals.
//
// It never trusts that systemd applied a property. systemd accepts
// CPUQuota=, MemoryMax= and TasksMax= for any unit and silently drops them
// when the controller is not delegated to it (a user manager on a hybrid
// host gets none), so every limit is read back from the unit's cgroup, in
// the cgroup2 files and in the v1 controller hierarchies, and Applied and
// Probe report what the kernel holds, not what was asked.
//
// It is not a general systemd client: it touches only units named by
// package scope (marshal-*.slice, marshal-*.scope) and its own probe
// slices.
package systemd
