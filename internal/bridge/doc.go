// Package bridge is the relay inside a netns agent's network namespace:
// it accepts the connections the agent's tools make to the bridge's
// loopback address, where their proxy variables point, and carries each
// one, byte for byte, to the egress proxy's unix socket, which a pathname
// reaches across network namespaces. The proxy sees the bridge as the
// peer: a process in the agent's scope and namespace, which is who it
// attributes the connection to.
//
// The bridge understands no protocol and decides nothing: the proxy
// does. It lives exactly as long as the agent (UntilExit), so the
// agent's scope empties when the agent is gone.
//
// It is run by marshal-confine, which makes the namespace and the
// listener; it does not make namespaces itself.
package bridge
