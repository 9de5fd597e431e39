package egress

import (
	"encoding/json"
	"time"
)

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
)

// Record is one decision of the proxy, as the audit log keeps it: one
// JSON line per connection (per request for plain HTTP), written when it
// ends, so that it carries the bytes each way and how long it lasted.
type Record struct {
	// Time is when the request was decided.
	Time time.Time `json:"time"`
	// Scope, Profile, Workspace and Attempt name the launch the peer
	// belongs to; Unscoped says why it belongs to none.
	Scope     string `json:"scope,omitempty"`
	Profile   string `json:"profile,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Attempt   string `json:"attempt,omitempty"`
	Unscoped  string `json:"unscoped,omitempty"`
	// PID is the peer process, 0 when it could not be found; Command
	// its name (/proc/<pid>/comm).
	PID     int    `json:"pid,omitempty"`
	Command string `json:"command,omitempty"`
	// Transport is how the peer reached the proxy: tcp or unix.
	Transport string `json:"transport"`
	// Protocol is http, connect or socks5.
	Protocol string `json:"protocol"`
	// Host and Port are the destination asked for.
	Host string `json:"host,omitempty"`
	Port uint16 `json:"port,omitempty"`
	// Address is the address decided on: dialed when allowed.
	Address string `json:"address,omitempty"`
	// Verdict is allow, deny or error.
	Verdict string `json:"verdict"`
	// Rule is the index of the profile's rule that decided, absent when
	// none did.
	Rule *int `json:"rule,omitempty"`
	// Reason says what decided: rule, default, private_range, unscoped,
	// no_profile, connection_limit.
	Reason string `json:"reason,omitempty"`
	// Error says why an allowed connection failed, or why a request
	// could not be decided.
	Error string `json:"error,omitempty"`
	// BytesOut went to the destination, BytesIn came from it.
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// Duration is how long the connection lasted after the decision.
	Duration Milliseconds `json:"duration_ms"`
}

// Milliseconds is a duration written as a number of milliseconds.
type Milliseconds time.Duration

// MarshalJSON writes d in milliseconds, to the microsecond.
func (d Milliseconds) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(time.Duration(d).Microseconds()) / 1000)
}

// UnmarshalJSON reads a number of milliseconds.
func (d *Milliseconds) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Milliseconds(ms * float64(time.Millisecond))
	return nil
}
