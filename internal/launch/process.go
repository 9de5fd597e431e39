package launch

import (
	"os"
	"sync"
)

// Process is a process pinned for its launch: its pid, uid and start
// time, and a pidfd that keeps naming it whatever happens to its pid
// afterwards, so that its exit is known without polling and a reused pid
// is never taken for it. Pin and PinPeer make one; Close releases the
// pidfd.
type Process struct {
	PID int
	UID uint32
	// StartTime is field 22 of /proc/<pid>/stat, read once the pidfd was
	// held.
	StartTime uint64

	// fd is the pidfd, non-blocking and registered with the runtime's
	// poller.
	fd *os.File

	// mu guards closed.
	mu     sync.Mutex
	closed bool
}

// Close releases the pidfd. It is safe to call more than once; a Wait in
// progress returns.
func (p *Process) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.fd.Close()
}
