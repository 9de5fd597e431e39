// Package clienthello reads the TLS ClientHello a client sends first in
// a tunnel, without terminating TLS, to learn the server name (SNI) it
// asks for: the egress proxy compares it with the host the tunnel was
// decided for, so that a tunnel allowed to one site of a shared front is
// not used to reach another (domain fronting).
//
// Read is bounded (a byte limit; the caller sets the deadline), reassembles
// a ClientHello fragmented across records, and refuses what a server
// would refuse and a reader could be fooled by: duplicate server_name
// extensions, several host names, lengths that do not add up. It returns
// every byte it read, for the caller to forward once it decided.
//
// It does not decrypt, does not understand Encrypted Client Hello (the
// outer name is the one read), and does not parse anything after the
// ClientHello.
package clienthello
