package egress

import (
	"fmt"
	"net"
	"net/netip"
)

// ListenTCP listens on addr, which must be a loopback IP address and a
// port (127.0.0.1:3128, [::1]:3128): the proxy identifies a TCP peer by
// the kernel's record of its socket, which only a local peer has.
func ListenTCP(addr string) (net.Listener, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress address %q: want a loopback IP address and port, such as 127.0.0.1:3128", addr)
	}
	if !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("egress address %s: %w", addr, ErrNotLoopback)
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return ln, nil
}
