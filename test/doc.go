//go:build linux

// Package test holds marshal's end-to-end tests: they build marshald and
// marshalctl, run the daemon on temporary directories with the cgroupfs
// backend on a private cgroup subtree, and drive it only through
// marshalctl and files, as a user would.
package test
