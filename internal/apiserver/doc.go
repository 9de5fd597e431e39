// Package apiserver serves marshald's local API: HTTP/JSON on a unix
// socket, as package localapi defines it. It reads every caller's
// credentials once per connection with SO_PEERCRED and answers only the
// daemon's own uid, root and, when configured, the members of one group;
// everyone else gets 403 FORBIDDEN and nothing more.
//
// The server owns the wire: routes, methods, body limits, watch streams
// and the mapping of errors to localapi codes. What the answers say comes
// from a Daemon, which marshald implements; the server holds no state of
// its own. Later routes (launch, metrics) are added with Handle and sit
// behind the same peer check.
//
// It is not the daemon and not the client: it does not reconcile, write
// manifests or decide policy, and package client is the other end.
package apiserver
