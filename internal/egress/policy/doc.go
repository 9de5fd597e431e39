// Package policy decides egress: whether a profile's rules (a Profile's
// spec.egress, api/v1alpha1) let a connection reach a destination, given
// as the host name asked for (none for an IP address) and the address
// that would be dialed.
//
// Compile turns a declared policy into matchers once; Decide is then a
// pure function of the policy and the destination. Rules are tried in
// order and the first that matches decides; no match is the policy's
// default. Host rules match names (exactly, "*.suffix" at any depth, or
// "*" for any name) and never an IP address; CIDR rules match addresses.
//
// Private addresses (Private: loopback, RFC 1918, link-local with cloud
// metadata, CGNAT, IPv6 unique-local, and the forms that reach them) are
// never allowed by a rule that does not name them: an allow rule matches
// such an address only through a host named without a wildcard or a CIDR
// that contains it, and a default of allow never reaches them. A deny
// rule matches them as any other address.
//
// This package neither resolves names nor dials: the proxy resolves,
// asks Decide about every address, and dials one it allowed.
package policy
