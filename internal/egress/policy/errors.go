package policy

import "errors"

// ErrBadHost is returned by ParseHost for a host that is neither an IP
// address nor a DNS name.
var ErrBadHost = errors.New("not a host name or IP address")
