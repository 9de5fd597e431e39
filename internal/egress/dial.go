package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/marshal-dev/marshal/internal/egress/policy"
)

// target is a destination as a request names it.
type target struct {
	protocol string
	// host is the destination as recorded: the name, or the address.
	host string
	// name is the DNS name asked for, "" when the request gave an
	// address, which addr is then.
	name string
	addr netip.Addr
	port uint16
}

// newTarget reads the host and port of a request.
func newTarget(protocol, host string, port uint16) (target, error) {
	name, addr, err := policy.ParseHost(host)
	if err != nil {
		return target{}, err
	}
	t := target{protocol: protocol, name: name, addr: addr, port: port, host: name}
	if name == "" {
		t.host = addr.String()
	}
	return t, nil
}

func (t target) hostPort() string {
	return net.JoinHostPort(t.host, strconv.Itoa(int(t.port)))
}

// decide decides t for c's peer: it fills rec's verdict, and returns the
// addresses it may dial, in the resolver's order, when allowed.
func (p *Proxy) decide(ctx context.Context, c *conn, t target, rec *Record) []netip.Addr {
	start := time.Now()
	defer func() { p.observe(rec, time.Since(start)) }()
	var (
		pol    *policy.Policy
		reason string
	)
	if c.who.Scoped() {
		pol, reason = p.policies.forProfile(c.who.Profile)
	} else {
		pol, reason = p.policies.forUnscoped()
	}
	if pol == nil {
		rec.Verdict, rec.Reason = VerdictDeny, reason
		return nil
	}
	if t.name == "" {
		d := pol.DecideWith("", t.addr, t.port, p.opts.HostAddresses)
		rec.Address = netip.AddrPortFrom(t.addr, t.port).String()
		setDecision(rec, d)
		if !d.Allow {
			return nil
		}
		return []netip.Addr{t.addr}
	}
	if d, final := pol.Prejudge(t.name, t.port); final {
		setDecision(rec, d)
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, p.opts.ResolveTimeout)
	addrs, err := p.opts.Resolver.LookupNetIP(rctx, "ip", t.name)
	cancel()
	if err != nil {
		rec.Verdict, rec.Error = VerdictError, ErrorDNS
		return nil
	}
	var allowed []netip.Addr
	var first *policy.Decision
	for _, a := range addrs {
		a = a.Unmap()
		d := pol.DecideWith(t.name, a, t.port, p.opts.HostAddresses)
		if d.Allow {
			if allowed == nil {
				rec.Address = netip.AddrPortFrom(a, t.port).String()
				setDecision(rec, d)
			}
			allowed = append(allowed, a)
		} else if first == nil {
			first = &d
			if allowed == nil {
				rec.Address = netip.AddrPortFrom(a, t.port).String()
			}
		}
	}
	switch {
	case allowed != nil:
	case first != nil:
		setDecision(rec, *first)
	default:
		rec.Verdict, rec.Error = VerdictError, ErrorNoAddress
	}
	return allowed
}

func setDecision(rec *Record, d policy.Decision) {
	rec.Verdict, rec.Reason = VerdictDeny, string(d.Reason)
	if d.Allow {
		rec.Verdict = VerdictAllow
	}
	rec.Rule = nil
	if d.Rule >= 0 {
		rule := d.Rule
		rec.Rule = &rule
	}
}

// open decides t for c's peer and, when allowed, dials it; it returns
// nil when the connection is refused or failed, as rec says.
func (p *Proxy) open(ctx context.Context, c *conn, t target, rec *Record) net.Conn {
	addrs := p.decide(ctx, c, t, rec)
	if rec.Verdict != VerdictAllow {
		return nil
	}
	return p.dial(ctx, addrs, t, rec)
}

// dial connects to the first of addrs that answers, on t's port, within
// the dial timeout. It fills rec's address, and its error on failure.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, t target, rec *Record) net.Conn {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	var err error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, t.port)
		var nc net.Conn
		nc, err = p.opts.Dialer.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			rec.Address = ap.String()
			return nc
		}
		if ctx.Err() != nil {
			break
		}
	}
	rec.Error = dialError(err)
	return nil
}

// dialError names why a dial failed.
func dialError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrorRefused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ErrorTimeout
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return ErrorUnreachable
	case errors.Is(err, context.Canceled):
		return ErrorProxyStopped
	}
	return ErrorDial
}
