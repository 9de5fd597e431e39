// Package isolation is what netns isolation needs on this host and how
// an execution runs under it: the marshal-confine helper that the
// launching process execs in place of the agent (Command), the kernel
// settings that allow a user its namespaces (Check), a try of the real
// thing for marshalctl doctor (Probe), and the bridge's address inside
// the namespace, where the proxy variables point.
//
// It makes no namespace itself, and is small enough for marshalctl to
// link.
package isolation
