// Package daemon is marshald: it wires the manifest source, the stores,
// the controllers, the cgroup backend, the event recorder and the local API
// into one process, and runs them until its context ends.
//
// Stopping marshald never stops an agent: scopes outlive the daemon, and
// the next start finds them again in the cgroup tree.
package daemon
