package peer

// Cred is what the kernel recorded about the process at the other end of
// a unix socket when it connected (or created the socket pair).
type Cred struct {
	// PID is 0 when that process is not visible in this pid namespace.
	PID int    `json:"pid"`
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}
