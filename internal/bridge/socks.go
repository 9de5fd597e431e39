package bridge

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 as the bridge speaks it to the proxy: no authentication,
// CONNECT and Tor's RESOLVE, a name as the destination.
const (
	socksVersion    = 0x05
	socksNoAuth     = 0x00
	socksConnect    = 0x01
	socksResolve    = 0xf0
	socksIPv4       = 0x01
	socksDomain     = 0x03
	socksIPv6       = 0x04
	socksSucceeded  = 0x00
	socksNotAllowed = 0x02
)

// errNotAllowed is the proxy's refusal of a name by the profile's rules.
var errNotAllowed = errors.New("bridge: not allowed by the proxy's rules")

// socksRequest dials the proxy's socket, asks cmd for name and port,
// and returns the connection and the address of a successful reply. It
// gives up at ctx's end or after DialTimeout.
func socksRequest(ctx context.Context, socket string, cmd byte, name string, port uint16) (net.Conn, netip.Addr, error) {
	if len(name) == 0 || len(name) > 255 {
		return nil, netip.Addr{}, fmt.Errorf("bridge: a name of %d bytes", len(name))
	}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	addr, err := socksExchange(c, cmd, name, port)
	if err != nil {
		c.Close()
		return nil, netip.Addr{}, err
	}
	c.SetDeadline(time.Time{})
	return c, addr, nil
}

func socksExchange(c io.ReadWriter, cmd byte, name string, port uint16) (netip.Addr, error) {
	req := []byte{socksVersion, 1, socksNoAuth, socksVersion, cmd, 0, socksDomain, byte(len(name))}
	req = append(req, name...)
	req = binary.BigEndian.AppendUint16(req, port)
	if _, err := c.Write(req); err != nil {
		return netip.Addr{}, err
	}
	var b [2 + 4 + 16 + 2]byte
	if _, err := io.ReadFull(c, b[:2+4]); err != nil {
		return netip.Addr{}, err
	}
	if b[0] != socksVersion || b[1] != socksNoAuth || b[2] != socksVersion {
		return netip.Addr{}, errors.New("bridge: the proxy does not speak SOCKS5")
	}
	switch b[3] {
	case socksSucceeded:
	case socksNotAllowed:
		return netip.Addr{}, errNotAllowed
	default:
		return netip.Addr{}, fmt.Errorf("bridge: the proxy answered %d", b[3])
	}
	n := 4
	switch b[5] {
	case socksIPv4:
	case socksIPv6:
		n = 16
	default:
		return netip.Addr{}, fmt.Errorf("bridge: the proxy answered address type %d", b[5])
	}
	if _, err := io.ReadFull(c, b[6:6+n+2]); err != nil {
		return netip.Addr{}, err
	}
	a, _ := netip.AddrFromSlice(b[6 : 6+n])
	return a.Unmap(), nil
}
