package egress

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

// SOCKS versions, told apart from HTTP by a connection's first byte.
const (
	socks5Version = 0x05
	socks4Version = 0x04
)

// SOCKS5 (RFC 1928) methods, commands, address types and replies.
const (
	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksConnect = 0x01
	// socksResolve is Tor's extension: a request like CONNECT whose
	// reply carries the name's address, and nothing is carried.
	socksResolve = 0xf0

	socksIPv4   = 0x01
	socksDomain = 0x03
	socksIPv6   = 0x04

	socksSucceeded           = 0x00
	socksGeneralFailure      = 0x01
	socksNotAllowed          = 0x02
	socksNetworkUnreachable  = 0x03
	socksHostUnreachable     = 0x04
	socksConnectionRefused   = 0x05
	socksCommandNotSupported = 0x07
	socksAddressNotSupported = 0x08
)

// socksError is a request that cannot be served, with the reply that
// says so.
type socksError struct {
	reply byte
	msg   string
}

func (e *socksError) Error() string { return "socks5: " + e.msg }

// socksRequest is a SOCKS5 request as read: its command and destination.
type socksRequest struct {
	cmd  byte
	host string // an IP address or a name, as sent
	port uint16
}

// readSOCKS reads a SOCKS5 greeting (the version byte already read) and
// request from r, answering the greeting on w: it offers "no
// authentication" when the client does, and refuses the client otherwise.
// Sizes are bounded by the protocol: 255 methods, a name of 255 bytes.
func readSOCKS(r io.Reader, w io.Writer) (socksRequest, error) {
	var b [2 + 255]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return socksRequest{}, err
	}
	methods := b[1 : 1+int(b[0])]
	if _, err := io.ReadFull(r, methods); err != nil {
		return socksRequest{}, err
	}
	ok := false
	for _, m := range methods {
		ok = ok || m == socksNoAuth
	}
	if !ok {
		w.Write([]byte{socks5Version, socksNoAcceptable})
		return socksRequest{}, &socksError{msg: "the client offers no method without authentication"}
	}
	if _, err := w.Write([]byte{socks5Version, socksNoAuth}); err != nil {
		return socksRequest{}, err
	}
	// VER CMD RSV ATYP
	if _, err := io.ReadFull(r, b[:4]); err != nil {
		return socksRequest{}, err
	}
	if b[0] != socks5Version {
		return socksRequest{}, &socksError{reply: socksGeneralFailure, msg: fmt.Sprintf("request of version %d", b[0])}
	}
	req := socksRequest{cmd: b[1]}
	atyp := b[3]
	switch atyp {
	case socksIPv4, socksIPv6:
		n := 4
		if atyp == socksIPv6 {
			n = 16
		}
		if _, err := io.ReadFull(r, b[:n]); err != nil {
			return socksRequest{}, err
		}
		a, _ := netip.AddrFromSlice(b[:n])
		req.host = a.Unmap().String()
	case socksDomain:
		if _, err := io.ReadFull(r, b[:1]); err != nil {
			return socksRequest{}, err
		}
		n := int(b[0])
		if _, err := io.ReadFull(r, b[1:1+n]); err != nil {
			return socksRequest{}, err
		}
		req.host = string(b[1 : 1+n])
		if n == 0 {
			return socksRequest{}, &socksError{reply: socksHostUnreachable, msg: "an empty name"}
		}
	default:
		return socksRequest{}, &socksError{reply: socksAddressNotSupported, msg: fmt.Sprintf("address type %d", atyp)}
	}
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return socksRequest{}, err
	}
	req.port = binary.BigEndian.Uint16(b[:2])
	if req.cmd != socksConnect && req.cmd != socksResolve {
		// BIND and UDP ASSOCIATE are not served.
		return req, &socksError{reply: socksCommandNotSupported, msg: fmt.Sprintf("command %d", req.cmd)}
	}
	if req.cmd == socksResolve {
		// The port of a RESOLVE means nothing.
		req.port = 0
		return req, nil
	}
	if req.port == 0 {
		return req, &socksError{reply: socksHostUnreachable, msg: "port 0"}
	}
	return req, nil
}

// socksReply writes a reply with the bound address bound (the zero
// address when none).
func socksReply(w io.Writer, reply byte, bound netip.AddrPort) error {
	b := []byte{socks5Version, reply, 0}
	a := bound.Addr()
	switch {
	case a.Is6() && !a.Is4In6():
		b = append(b, socksIPv6)
		b = append(b, a.AsSlice()...)
	default:
		b = append(b, socksIPv4)
		if a.IsValid() {
			b = append(b, a.Unmap().AsSlice()...)
		} else {
			b = append(b, 0, 0, 0, 0)
		}
	}
	b = binary.BigEndian.AppendUint16(b, bound.Port())
	_, err := w.Write(b)
	return err
}

// serveSOCKS is the SOCKS5 front-end: it reads the request of a
// connection whose version byte was read, and hands it to handle. full
// says the peer's share of connections is taken: the request is read and
// refused.
func (p *Proxy) serveSOCKS(ctx context.Context, c *conn, full bool) {
	sr, err := readSOCKS(c.Conn, c.Conn)
	req := request{protocol: ProtocolSOCKS5, host: sr.host, port: sr.port, full: full}
	f := &socksFront{p: p, c: c}
	var se *socksError
	switch {
	case errors.As(err, &se):
		req.malformed, f.malformed, f.reply = ErrorBadRequest, true, se.reply
		if se.reply == socksCommandNotSupported {
			req.malformed = ErrorUnsupported
		}
	case err != nil:
		c.Close() // cut short: nothing to answer
		return
	case sr.cmd == socksResolve:
		req.protocol, req.resolve = ProtocolDNS, true
		// Only a name is resolved: an address is no question.
		if req.target, err = newTarget(ProtocolDNS, sr.host, 0); err != nil || req.target.name == "" {
			req.badTarget = ErrorBadHost
		}
	default:
		if req.target, err = newTarget(ProtocolSOCKS5, sr.host, sr.port); err != nil {
			req.badTarget = ErrorBadHost
		}
	}
	p.handle(ctx, c, req, f)
}

// socksFront answers and carries a SOCKS5 request.
type socksFront struct {
	p *Proxy
	c *conn
	// malformed says the request could not be read, and reply is the
	// answer to that (none when 0).
	malformed bool
	reply     byte
}

// refuse answers with the reply that says why (none when 0) and closes
// the connection.
func (f *socksFront) refuse(rec *Record) {
	reply := f.reply
	if !f.malformed {
		reply = socksRefusal(rec)
	}
	if reply != 0 {
		socksReply(f.c.Conn, reply, netip.AddrPort{})
	}
	f.c.Close()
}

// carry answers with the address bound upstream and tunnels.
func (f *socksFront) carry(up net.Conn, check helloCheck) carried {
	var bound netip.AddrPort
	if ta, ok := up.LocalAddr().(*net.TCPAddr); ok {
		bound = ta.AddrPort()
	}
	if err := socksReply(f.c.Conn, socksSucceeded, bound); err != nil {
		up.Close()
		f.c.Close()
		return carried{}
	}
	f.c.SetReadDeadline(time.Time{})
	f.p.lookForOwner(f.c)
	return f.p.tunnel(f.c, up, nil, check)
}

// resolved answers a RESOLVE with addr, and closes the connection.
func (f *socksFront) resolved(addr netip.Addr) {
	socksReply(f.c.Conn, socksSucceeded, netip.AddrPortFrom(addr, 0))
	f.c.Close()
}

// socksRefusal is the reply to a request rec says was refused or failed.
func socksRefusal(rec *Record) byte {
	switch {
	case rec.Reason == ReasonConnectionLimit:
		return socksGeneralFailure
	case rec.Verdict == VerdictDeny:
		return socksNotAllowed
	case rec.Verdict == VerdictError:
		return socksHostUnreachable
	}
	switch rec.Error {
	case ErrorRefused:
		return socksConnectionRefused
	case ErrorUnreachable:
		return socksNetworkUnreachable
	case ErrorTimeout:
		return socksHostUnreachable
	}
	return socksGeneralFailure
}
