// Package control decides what a caller may ask of marshald: the rule of
// the control plane, that the governed cannot govern. The local API and
// the DevGuard socket attribute every caller (package peer) to a Caller,
// the user or an agent, and ask Authorize before anything changes or
// starts.
//
// The user, a process in no marshal scope in marshald's own network
// namespace, may ask everything the socket's permissions let it reach.
// An agent may read and run into its own workspace; anything else needs
// a grant in its Profile's spec.control. A caller in a scope marshald did
// not launch, or in another launch's network namespace, is the most
// restricted agent: it may read, and nothing else.
//
// It does not read credentials or cgroups (package peer does) and does
// not answer the wire (the servers do): it is the decision alone.
package control
