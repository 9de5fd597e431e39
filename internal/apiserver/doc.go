// Package apiserver serves marshald's local API: HTTP/JSON on a unix
// socket, as package localapi defines it. It reads every caller's
// credentials once per connection with SO_PEERCRED and answers only the
// daemon's own uid, root and, when configured, the members of one group;
// everyone else gets 403 FORBIDDEN and nothing more.
//
// Every request is bounded: its head in time, its body in size (a body
// declared too long is refused before it is read) and in time as a whole
// (Options.BodyTimeout, however slowly it trickles), and one uid holds at
// most Options.MaxConnsPerPeer connections. A request without a body, a
// watch among them, is not bounded in time: it lives as long as its peer.
//
// The server owns the wire, and is the only part of marshald that does:
// every route and its method, body limits, watch streams, the pinning of
// a run's caller, and the mapping of errors, refusals and attempt states
// to localapi codes. What the answers say comes from a Daemon, which
// marshald implements in the types of its own packages (launch.Plan,
// launch.Refusal, …); the server holds no state of its own. A new route
// is a method on Daemon and a handler here, behind the same peer check.
//
// It is not the daemon and not the client: it does not reconcile, launch,
// write manifests or decide policy, and package client is the other end.
package apiserver
