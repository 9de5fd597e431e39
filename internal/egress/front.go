package egress

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// request is one request of a peer as its protocol's front-end read it:
// where it asks to go, or why it cannot be decided.
type request struct {
	protocol string
	// host and port name the destination in the record until target
	// does: as the request gave them, "" and 0 when it gave none that
	// could be read.
	host string
	port uint16
	// target is the destination, when malformed and badTarget are "".
	target target
	// malformed names the error of a request that could not be read
	// whole (ErrorBadRequest, ErrorUnsupported), judged before the
	// peer's share; badTarget that of a destination that is none
	// (ErrorBadHost, ErrorBadRequest), judged after it.
	malformed, badTarget string
	// full says the peer's share of connections is taken.
	full bool
	// resolve says the request asks only whether target's name may be
	// reached, and for its placeholder address: nothing is dialed.
	resolve bool
}

// front is a protocol's side of one request: how it answers it and
// carries it. The request's decision and its record are handle's.
type front interface {
	// refuse answers a request that rec says was refused or failed, and
	// closes what is to be closed.
	refuse(rec *Record)
	// carry answers that the request is allowed and carries it between
	// the peer and up, the connection dialled for it, until it ends;
	// check, when not nil, reads a tunnel's ClientHello first. It closes
	// up.
	carry(up net.Conn, check helloCheck) carried
}

// answerer is a front-end that answers a resolve request.
type answerer interface {
	// resolved answers that the name is allowed, with its placeholder
	// address, and closes the connection.
	resolved(addr netip.Addr)
}

// carried is what became of an allowed request once carried.
type carried struct {
	// out and in are the bytes that went to up and came from it.
	out, in int64
	// failed names the error of a request that could not be carried
	// (ErrorDial), "" when it was.
	failed string
	// hello is why the tunnel's ClientHello ended it, nil when it did
	// not.
	hello *helloRefusal
}

// handle is the one path of every request, whichever its protocol: it
// begins the request's record, decides it, dials it, has its front-end
// refuse or carry it, and audits it. The record is written here and in
// newRecord and finish, nowhere else.
func (p *Proxy) handle(ctx context.Context, c *conn, req request, f front) {
	rec := p.newRecord(c, req)
	var up net.Conn
	switch {
	case req.malformed != "":
		rec.Verdict, rec.Error = VerdictError, req.malformed
	case req.full:
		rec.Verdict, rec.Reason = VerdictDeny, ReasonConnectionLimit
	case req.badTarget != "":
		rec.Verdict, rec.Error = VerdictError, req.badTarget
	case req.resolve:
		rec.Host = req.target.host
		start := time.Now()
		v := p.decideName(c.who, req.target)
		rec.Verdict, rec.Reason, rec.Rule = v.verdict, v.reason, v.rule
		p.observe(rec, time.Since(start))
		ans, ok := f.(answerer)
		if rec.Verdict != VerdictAllow || !ok {
			break
		}
		a := Placeholder(req.target.name)
		rec.Address = a.String()
		p.finish(c, rec)
		ans.resolved(a)
		return
	default:
		rec.Host, rec.Port = req.target.host, req.target.port
		start := time.Now()
		v, addrs := p.decide(ctx, c.who, req.target)
		rec.Verdict, rec.Reason, rec.Error, rec.Rule, rec.Address = v.verdict, v.reason, v.err, v.rule, v.address
		p.observe(rec, time.Since(start))
		if rec.Verdict != VerdictAllow {
			break
		}
		var addr netip.AddrPort
		if up, addr, rec.Error = p.dial(ctx, addrs, req.target); up != nil {
			rec.Address = addr.String()
		}
	}
	if up == nil {
		// Audited before it is answered: a client told no finds it in
		// the log already.
		p.finish(c, rec)
		f.refuse(rec)
		return
	}
	got := f.carry(up, p.helloCheck(c, req.target))
	rec.BytesOut, rec.BytesIn = got.out, got.in
	if got.failed != "" && rec.Error == "" {
		rec.Error = got.failed
	}
	if h := got.hello; h != nil {
		rec.Verdict = h.verdict
		if h.err != "" {
			rec.Error = h.err
		} else {
			rec.Reason, rec.Rule, rec.SNI = h.reason, nil, h.sni
		}
	}
	p.finish(c, rec)
}
