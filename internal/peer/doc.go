// Package peer says who is at the other end of a connection to marshald:
// which launch, if any, the peer process belongs to. The egress proxy
// asks it of every connection, the local API and the DevGuard socket of
// every caller, so that all three judge a peer by one rule.
//
// A peer is resolved from the kernel alone, never from a table: its
// credentials (SO_PEERCRED) and a pidfd for a unix socket, the socket
// diagnostics for TCP loopback, its cgroup through the scope parser
// (package scope), and its network namespace. It counts as a launch only
// when marshald recorded that launch (Launches), of the profile its scope
// names, at the path its scope is, and the peer is in the network
// namespace the launch was given; otherwise Who says why not.
//
// Credentials reads a unix socket's SO_PEERCRED alone, for the sockets
// that admit a caller by its uid.
//
// It decides nothing: what a launch or an unknown peer may do is its
// callers' policy (the proxy's rules, the control plane's grants).
package peer
