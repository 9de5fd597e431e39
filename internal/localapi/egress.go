package localapi

import (
	"encoding/json"
	"time"
)

// EgressLogPath streams the egress proxy's audit log: one EgressRecord
// per line (application/x-ndjson), oldest first; with FollowParam=1, then
// every record as it is written, until the client goes away.
const EgressLogPath = "/v1/egress/log"

// Query parameters of EgressLogPath.
const (
	// FollowParam=1 keeps the stream open for new records.
	FollowParam = "follow"
	// ProfileParam and WorkspaceParam keep only the records of one
	// profile or one workspace.
	ProfileParam   = "profile"
	WorkspaceParam = "workspace"
	// TailParam=N starts with the last N records kept, not the first.
	TailParam = "tail"
)

// EgressInfo says where marshald's egress proxy listens.
type EgressInfo struct {
	// Address is the TCP loopback address, "" when it does not listen
	// on TCP.
	Address string `json:"address,omitempty"`
	// Socket is the unix socket, "" when there is none.
	Socket string `json:"socket,omitempty"`
}

// EgressRecord is one decision of the egress proxy, as its audit log
// keeps it: one JSON line per connection (per request for plain HTTP),
// written when it ends, so that it carries the bytes each way and how
// long it lasted.
type EgressRecord struct {
	// Time is when the request was decided.
	Time time.Time `json:"time"`
	// Scope, Profile, Workspace and Attempt name the launch the peer
	// belongs to; Unscoped says why it belongs to none (no_scope,
	// scope_not_launched, other_netns, unknown_peer).
	Scope     string `json:"scope,omitempty"`
	Profile   string `json:"profile,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Attempt   string `json:"attempt,omitempty"`
	Unscoped  string `json:"unscoped,omitempty"`
	// Claimed is the scope an unscoped peer's group is named like, when
	// it is named like one (scope_not_launched, other_netns); Namespace
	// the scope of the launch whose network namespace it is in instead
	// (other_netns), when one is.
	Claimed   string `json:"claimed,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// PID is the peer process, 0 when it could not be found; Command
	// its name (/proc/<pid>/comm).
	PID     int    `json:"pid,omitempty"`
	Command string `json:"command,omitempty"`
	// Transport is how the peer reached the proxy: tcp or unix.
	Transport string `json:"transport"`
	// Protocol is http, connect or socks5; dns for a name a resolver
	// asked about, which nothing was dialed for.
	Protocol string `json:"protocol"`
	// Host and Port are the destination asked for.
	Host string `json:"host,omitempty"`
	Port uint16 `json:"port,omitempty"`
	// Address is the address decided on: the one dialed when allowed.
	Address string `json:"address,omitempty"`
	// Verdict is allow, deny or error.
	Verdict string `json:"verdict"`
	// Rule is the index of the profile's rule that decided, absent when
	// none did.
	Rule *int `json:"rule,omitempty"`
	// Reason says what decided: rule, default, private_range,
	// host_address, unscoped, no_profile, connection_limit, or
	// sni_mismatch (a tunnel's TLS ClientHello named another server).
	Reason string `json:"reason,omitempty"`
	// SNI is the server name of a tunnel refused for sni_mismatch,
	// lowercased, when it is a valid name or address.
	SNI string `json:"sni,omitempty"`
	// Error says why an allowed connection failed, or why a request
	// could not be decided (bad_request, bad_host, dns_failed,
	// no_address, connection_refused, timeout, unreachable, dial_failed,
	// unsupported_command, proxy_stopped, bad_client_hello).
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
