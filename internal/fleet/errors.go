package fleet

import "errors"

var (
	// ErrHostName is returned for a host name that cannot name a Host
	// object (a DNS-1123 label of at most 63 characters).
	ErrHostName = errors.New("invalid host name")
	// ErrNoHost is returned by HostStatus's writes while the API holds no
	// Host named after this host: there is no status to write.
	ErrNoHost = errors.New("no Host object for this host")
	// ErrIdentity is returned when the credential marshald reaches the
	// API with does not name this host (user marshal:host:<host name>):
	// it names another host, or none.
	ErrIdentity = errors.New("the credential does not name this host")
)
