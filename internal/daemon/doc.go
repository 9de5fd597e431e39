// Package daemon is marshald's composition root: it opens the state
// database, the cgroup backend, the admission journal and the socket,
// wires the manifest source, the stores, the controllers, the launch
// path, the metrics and the local API into one process, and runs them
// until its context ends.
//
// It answers the local API's questions (apiserver.Daemon) from those
// parts, in their own types; it serves no route and knows no wire code:
// HTTP, the routes and the mapping of errors and refusals to the wire
// are package apiserver's.
//
// Stopping marshald never stops an agent: scopes outlive the daemon, and
// the next start finds them again in the cgroup tree.
package daemon
