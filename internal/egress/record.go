package egress

import "github.com/marshal-dev/marshal/internal/localapi"

// Verdicts of a decision.
const (
	VerdictAllow = "allow"
	VerdictDeny  = "deny"
	// VerdictError is a request that could not be decided: it was
	// malformed, or its name did not resolve.
	VerdictError = "error"
)

// Reasons of a decision beyond the policy's own (policy.Reason: rule,
// default, private_range). Enumerations, never free text.
const (
	// ReasonUnscoped: the peer is no launch's and the Host does not allow
	// unscoped egress.
	ReasonUnscoped = "unscoped"
	// ReasonNoProfile: the peer's profile is not declared.
	ReasonNoProfile = "no_profile"
	// ReasonConnectionLimit: the proxy, or the peer's share of it, is
	// full.
	ReasonConnectionLimit = "connection_limit"
)

// Errors of a connection, after or instead of a decision.
const (
	ErrorBadRequest   = "bad_request"
	ErrorBadHost      = "bad_host"
	ErrorDNS          = "dns_failed"
	ErrorNoAddress    = "no_address"
	ErrorRefused      = "connection_refused"
	ErrorTimeout      = "timeout"
	ErrorUnreachable  = "unreachable"
	ErrorDial         = "dial_failed"
	ErrorUnsupported  = "unsupported_command"
	ErrorProxyStopped = "proxy_stopped"
)

// Protocols a request arrives in.
const (
	ProtocolHTTP    = "http"
	ProtocolConnect = "connect"
	ProtocolSOCKS5  = "socks5"
	// ProtocolDNS is a name a resolver asked about (SOCKS5 RESOLVE):
	// decided by name, answered with a placeholder address, never
	// looked up.
	ProtocolDNS = "dns"
)

// Record is one decision of the proxy, as the audit log keeps it and the
// local API serves it.
type Record = localapi.EgressRecord
