// Package testutil holds helpers for tests that need real parts of the
// host: root, a private cgroup subtree, a throwaway systemd user manager,
// child processes to put in groups, a deadline to wait on. Tests that
// need something the machine lacks skip with a one-line reason; as root
// (CI) they run.
//
// It is imported only by tests.
package testutil
