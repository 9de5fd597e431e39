// Package hostaddr keeps the set of this host's own addresses: every
// address on the interfaces of one network namespace, not only loopback.
// The machine's LAN or public address reaches the services it listens on
// as surely as 127.0.0.1 does, so egress refuses them as it refuses
// private ranges (policy.HostAddresses is the consumer's interface).
//
// The set is kept current from the kernel's address notifications
// (netlink), and listed again whenever a notification may have been lost:
// a notification speeds an update up, a list is the truth.
//
// It neither decides nor dials; outside Linux the set is empty.
package hostaddr
