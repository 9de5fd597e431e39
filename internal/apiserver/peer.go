package apiserver

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/marshal-dev/marshal/internal/control"
	peercred "github.com/marshal-dev/marshal/internal/peer"
)

// peerKey is the context key of a connection's *peer.
type peerKey struct{}

// peer is what the server learned about a connection's other end when it
// was accepted.
type peer struct {
	conn    *net.UnixConn
	uid     uint32
	allowed bool
	// overLimit is set when the peer's uid held its most connections
	// (Options.MaxConnsPerPeer) as this one was accepted.
	overLimit bool
	// refusal says why the peer is not allowed, for the 403 body.
	refusal string
	// caller is who an allowed peer is to the control plane; pid the
	// process SO_PEERCRED names.
	caller control.Caller
	pid    int
}

// connContext reads the peer of every new connection once, so each
// request on it is judged by the credentials recorded at connect, and
// counts an admitted peer's connection under its uid.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	p := s.checkPeer(c)
	if p.allowed && !s.conns.acquire(c, p.uid) {
		p.overLimit = true
		s.log.Warn("local API: a peer holds its most connections; refusing another", "uid", p.uid, "max", s.opts.MaxConnsPerPeer)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

func (s *Server) checkPeer(c net.Conn) *peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		s.log.Warn("local API: refused a connection that is not on a unix socket", "type", fmt.Sprintf("%T", c))
		return &peer{refusal: "the local API answers only on its unix socket"}
	}
	p := &peer{conn: uc}
	cred, err := peercred.Credentials(uc)
	if err != nil {
		s.log.Warn("local API: refused a peer whose credentials cannot be read", "err", err)
		p.refusal = "the caller's credentials could not be read"
		return p
	}
	p.uid, p.pid = cred.UID, cred.PID
	switch {
	case cred.UID == 0, cred.UID == s.uid:
		p.allowed = true
	case s.opts.AllowGID != nil:
		gid := *s.opts.AllowGID
		if cred.GID == gid {
			p.allowed = true
			break
		}
		groups, err := peerGroups(uc)
		if err != nil {
			s.log.Warn("local API: cannot read a peer's groups", "pid", cred.PID, "uid", cred.UID, "err", err)
		}
		p.allowed = slices.Contains(groups, gid)
	}
	if !p.allowed {
		p.refusal = s.refusal(cred)
		s.log.Warn("local API: refused peer", "pid", cred.PID, "uid", cred.UID, "gid", cred.GID)
		return p
	}
	p.caller = control.Caller{Kind: control.User}
	if s.opts.Control != nil {
		p.caller = s.opts.Control.Caller(uc)
	}
	return p
}

func (s *Server) refusal(cred peercred.Cred) string {
	who := fmt.Sprintf("uid %d and root", s.uid)
	if s.uid == 0 {
		who = "root"
	}
	if s.opts.AllowGID != nil {
		who += fmt.Sprintf(", and members of group %d", *s.opts.AllowGID)
	}
	return fmt.Sprintf("uid %d may not use this marshald: it serves %s; run marshalctl as one of them", cred.UID, who)
}

// peerConn returns the request's connection, for a route that needs more
// of the peer than its credentials (launch.PinPeer pins the peer with a
// pidfd). The handler must not read from or write to it.
func peerConn(ctx context.Context) (*net.UnixConn, bool) {
	p, _ := ctx.Value(peerKey{}).(*peer)
	if p == nil || p.conn == nil {
		return nil, false
	}
	return p.conn, true
}
