// Package cgrouptest fakes the kernel's cgroups for tests that must run
// without root, or on a layout this machine does not have. It is imported
// only by tests; nothing in a marshal binary links it. It has two fakes:
//
// Kernel models the kernel's cgroup hierarchies behind cgroup.FS, in the
// layouts hosts boot with (pure cgroup v2, hybrid, v1 only), so that the
// real cgroupfs backend runs on each: its rules (a group's
// cgroup.controllers is its parent's cgroup.subtree_control, a
// controller's files exist only where it is enabled, the no-internal-
// process rule) are the ones that decide whether marshal's limits can be
// written at all. See Kernel.
//
// Fake is a cgroup.Backend of its own over a fake cgroup2 tree, for tests
// of what sits above a backend.
//
// A Fake keeps marshal's tree (marshal.slice, the profile slices, the
// scopes) in a temporary directory laid out as the cgroup2 mount would
// be, Mount, and models what the kernel does there:
//
//   - groups: a slice or scope exists from its creation (EnsureSlice,
//     CreateScope, Mkdir) until it is removed; a group with a group below
//     it cannot be removed (ErrBusy), nor a populated one.
//   - membership: a process is in one group at a time; CreateScope moves
//     it in (out of any scope it was in). A group is populated while a
//     process moved into it or below it is alive: the Fake learns of each
//     exit from a pidfd, as the kernel would update cgroup.events. Each
//     group's cgroup.events and cgroup.procs are kept up to date on disk,
//     so that code and tests reading them (cgroup.ReadEvents,
//     cgroup.WaitEvents, inotify) see what they would on cgroup2.
//   - limits: the cgroup v2 interface files (cpu.max, memory.max,
//     pids.max) of the resources the host enforces (Options.Capabilities)
//     are written and read back as on cgroup2; a value written behind
//     the Fake's back is what the next read-back shows, as drift would
//     be. A resource not enforced has no file, and reading back shows no
//     limit.
//   - Kill sends SIGKILL to the processes in the scope, through their
//     pidfds; the exit then empties the scope, as cgroup.kill would.
//     Terminate sends SIGTERM the same way.
//   - Watch reports ScopeCreated, ScopePopulated, ScopeEmptied and
//     ScopeRemoved as they happen, in that order for each scope, starting
//     with every existing scope reported with Resync set, as
//     cgroup.WatchTree does.
//
// It does not model: enforcement (no limit holds a process back, nothing
// is throttled or OOM-killed), processes that a moved process forks (they
// are not members; the kernel would put them in the scope), cgroup v1
// hierarchies, freezing, usage other than the count of live members, and
// groups made or removed on disk behind its back. Tests that need any of
// these run on real cgroups, as root.
//
// Faults are injected per method with Fail: the next n calls return the
// given error and change nothing.
package cgrouptest
