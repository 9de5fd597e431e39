package egress

import (
	"bytes"
	"errors"
	"io"
	"net"
	"time"

	"github.com/marshal-dev/marshal/internal/egress/clienthello"
	"github.com/marshal-dev/marshal/internal/egress/policy"
)

// ReasonSNIMismatch: a tunnel's TLS ClientHello named another server than
// the host the tunnel was decided for or, for a tunnel to an IP address,
// a server the rules deny. Nothing was sent upstream.
const ReasonSNIMismatch = "sni_mismatch"

// ErrorBadClientHello: a tunnel's first bytes began a TLS handshake that
// did not parse, or did not end within the head limits.
const ErrorBadClientHello = "bad_client_hello"

// helloCheck reads a tunnel's first bytes from r and returns those to
// send upstream, or why the tunnel is to be closed with nothing sent.
type helloCheck func(r io.Reader) (forward []byte, refused *helloRefusal)

// helloRefusal is why a tunnel's ClientHello ended it, as its record
// then says: a deny for a server the tunnel was not decided for
// (ReasonSNIMismatch, and the server named), or an error (err) for a
// ClientHello that did not parse.
type helloRefusal struct {
	verdict, reason, err, sni string
}

// helloCheck returns the check of the ClientHello of a tunnel to t: every
// CONNECT, and SOCKS5 to port 443 (other ports carry protocols whose
// server may speak first).
func (p *Proxy) helloCheck(c *conn, t target) helloCheck {
	if p.skipHello.Load() || t.protocol == ProtocolSOCKS5 && t.port != 443 {
		return nil
	}
	return func(r io.Reader) ([]byte, *helloRefusal) {
		// Bounded as a request's head is: its size, the handshake
		// timeout.
		c.SetReadDeadline(time.Now().Add(p.opts.HandshakeTimeout))
		hello, raw, err := clienthello.Read(r, p.opts.MaxHeaderBytes)
		c.SetReadDeadline(time.Time{})
		var ne net.Error
		switch {
		case errors.Is(err, clienthello.ErrNotTLS):
			return raw, nil
		case len(raw) == 0 && (errors.Is(err, io.EOF) || errors.As(err, &ne) && ne.Timeout()):
			// The client said nothing, or nothing yet (its server
			// speaks first): not TLS.
			return nil, nil
		case err != nil:
			return nil, &helloRefusal{verdict: VerdictError, err: ErrorBadClientHello}
		case hello.ServerName == "" || p.serverNameAllowed(c, t, hello.ServerName):
			return raw, nil
		}
		refused := &helloRefusal{verdict: VerdictDeny, reason: ReasonSNIMismatch}
		if name, addr, err := policy.ParseHost(hello.ServerName); err == nil {
			refused.sni = name
			if name == "" {
				refused.sni = addr.String()
			}
		}
		return nil, refused
	}
}

// serverNameAllowed reports whether a ClientHello naming sni may go
// through a tunnel to t: when t was asked for by name, sni must be that
// name (case and a trailing dot aside); when by address, the rules must
// allow sni at that address.
func (p *Proxy) serverNameAllowed(c *conn, t target, sni string) bool {
	name, addr, err := policy.ParseHost(sni)
	switch {
	case err != nil:
		return false
	case t.name != "":
		return name == t.name
	case addr.IsValid():
		return addr == t.addr
	}
	pol, _ := p.policies.forProfile(c.who.Profile)
	if !c.who.Scoped() {
		pol, _ = p.policies.forUnscoped()
	}
	return pol != nil && pol.DecideWith(name, t.addr, t.port, p.opts.HostAddresses).Allow
}

// checkFirst runs check on the client's first bytes, early's first, and
// writes up what it lets through with the rest of early; it returns the
// bytes written, and false when the tunnel is to end: refused by check,
// or up failed.
func (p *Proxy) checkFirst(client io.Reader, up io.Writer, early []byte, profile string, check helloCheck) (int64, *helloRefusal, bool) {
	er := bytes.NewReader(early)
	fwd, refused := check(io.MultiReader(er, client))
	if refused != nil {
		return 0, refused, false
	}
	var sent int64
	for _, b := range [][]byte{fwd, early[len(early)-er.Len():]} {
		if len(b) == 0 {
			continue
		}
		n, err := up.Write(b)
		sent += int64(n)
		p.countBytes(profile, int64(n), 0)
		if err != nil {
			return sent, nil, false
		}
	}
	return sent, nil, true
}
