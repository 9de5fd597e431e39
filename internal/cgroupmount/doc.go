// Package cgroupmount finds where the cgroup hierarchies are mounted, from
// /proc/self/mountinfo: the cgroup2 mount and each v1 controller's. It
// uses the standard library alone, so that marshalctl, which must not
// link the daemon's cgroup code, reads the mounts as marshald does.
package cgroupmount
