package fleet

import "errors"

var (
	// ErrHostName is returned for a host name that cannot name a Host
	// object (a DNS-1123 label of at most 63 characters).
	ErrHostName = errors.New("invalid host name")
	// ErrNoHost is returned by HostStatus's writes while the API holds no
	// Host named after this host: there is no status to write.
	ErrNoHost = errors.New("no Host object for this host")
)
