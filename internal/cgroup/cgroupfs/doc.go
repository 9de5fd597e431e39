// Package cgroupfs is the cgroup.Backend that writes the cgroup tree
// directly, for hosts where marshald runs without a systemd manager (or is
// told not to use it).
//
// It lays the tree out as systemd would, so that one parser
// (internal/scope) serves both backends:
//
//	<cgroup2 mount><Root>/marshal.slice/marshal-<esc(profile)>.slice/marshal-<esc(profile)>-<id>.scope
//
// Limits go to cgroup v2 controllers when the cgroup2 hierarchy has them.
// A v2 group's limit files exist only where its parent enables the
// controller, so every slice enables cpu, memory and pids for its scopes,
// as do marshal.slice and Root above it, marshal's own groups; Root's
// parent is not marshal's, and what it delegates (Root's
// cgroup.controllers) is what marshal can have. A group that holds
// processes can enable nothing for its children (the no-internal-process
// rule): marshal never puts a process in Root or a slice, moves none out,
// and reports the resources it cannot hold, with the reason, in Probe.
// On a hybrid host, where cpu, memory and pids are bound to cgroup v1
// hierarchies, the same relative path is created in each v1 hierarchy that
// carries a limit and the limit is set there (cpu.cfs_quota_us with
// cpu.cfs_period_us, memory.limit_in_bytes, pids.max), so the kernel
// enforces it either way. Every limit is read back after writing;
// cgroup.Applied says what the kernel holds and through which file.
//
// The package uses plain file I/O through the helpers of package cgroup
// rather than github.com/containerd/cgroups/v3, for correctness first:
// cgroup2.NewManager creates groups with MkdirAll, which cannot tell
// "created" from "already there" (CreateScope must return ErrExists), and
// writes cgroup.subtree_control of every ancestor up to the mount root,
// groups marshal does not own, even when nothing is missing; its Delete
// retries a busy group with sleeps instead of reporting ErrBusy; cgroup1
// creates a group in every mounted v1 hierarchy unless given a list, and
// its pids controller cannot remove a limit once set. The helpers are
// what the systemd backend reads limits back with too, so both backends
// report alike. It is also faster: each operation is a few reads and
// writes of small files, done with direct system calls.
//
// It is not a general cgroup library: it only touches groups below Root,
// and only those named by internal/scope.
package cgroupfs
