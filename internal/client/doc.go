// Package client is the other end of marshald's local API: HTTP/JSON over
// the daemon's unix socket, with one method per route. Failed requests
// come back as *localapi.Error (use errors.As), and a daemon that cannot
// be reached as *UnreachableError, whose message says what to do.
// DefaultSocket and ResolveSocket say where the socket is, for the CLI
// and the daemon alike.
//
// It is not the CLI: it prints nothing and decides no exit codes.
package client
