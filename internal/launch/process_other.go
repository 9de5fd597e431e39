//go:build !linux

package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/marshal-dev/marshal/internal/identity"
)

// PinPeer needs pidfds: Linux only.
func PinPeer(conn *net.UnixConn) (*Process, error) {
	return nil, fmt.Errorf("pinning the caller: %w", errors.ErrUnsupported)
}

// Pin needs pidfds: Linux only.
func Pin(pid int, uid uint32, want uint64) (*Process, error) {
	return nil, fmt.Errorf("pinning pid %d: %w", pid, errors.ErrUnsupported)
}

// Exited reports true: nothing is pinned here.
func (p *Process) Exited() bool { return true }

// Wait returns at once: nothing is pinned here.
func (p *Process) Wait(ctx context.Context) error { return errors.ErrUnsupported }

// CooperativeNice is the nice value of the cooperative CPU level.
const CooperativeNice = 10

func (p *Process) deprioritize() (bool, error) { return false, errors.ErrUnsupported }

// ExitStatus reports false: nothing is pinned here.
func (p *Process) ExitStatus() (syscall.WaitStatus, bool) { return 0, false }
func (p *Process) openNetNS() (*os.File, identity.NetNS, error) {
	return nil, identity.NetNS{}, errors.ErrUnsupported
}
