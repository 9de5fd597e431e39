// Package bridge is the relay inside a netns agent's network namespace:
// it accepts the connections the agent's tools make to the bridge's
// loopback address, where their proxy variables point, and carries each
// one, byte for byte, to the egress proxy's unix socket, which a pathname
// reaches across network namespaces. The proxy sees the bridge as the
// peer: a process in the agent's scope and namespace, which is who it
// attributes the connection to.
//
// The bridge decides nothing: the proxy does. It is also the agent's
// resolver (ServeDNS): it asks the proxy about each name with SOCKS5
// RESOLVE, answers allowed names with a placeholder address on loopback,
// listens there, and carries what connects to the proxy by name. No
// query leaves the namespace. It lives exactly as long as the agent (UntilExit), so the
// agent's scope empties when the agent is gone.
//
// It is run by marshal-confine, which makes the namespace and the
// listener; it does not make namespaces itself.
package bridge
