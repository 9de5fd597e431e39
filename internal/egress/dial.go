package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"github.com/marshal-dev/marshal/internal/egress/policy"
	"github.com/marshal-dev/marshal/internal/peer"
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

// verdict is what decided a request, or why it could not be: the fields
// of its record that say so, which handle writes there.
type verdict struct {
	verdict, reason, err string
	rule                 *int
	// address is the address decided, or the first one refused.
	address string
}

// decided is the verdict of a policy's decision d on address a.
func decided(d policy.Decision, a netip.AddrPort) verdict {
	v := verdict{verdict: VerdictDeny, reason: string(d.Reason)}
	if d.Allow {
		v.verdict = VerdictAllow
	}
	if d.Rule >= 0 {
		rule := d.Rule
		v.rule = &rule
	}
	if a.IsValid() {
		v.address = a.String()
	}
	return v
}

// decide decides t for a peer who is who: its verdict, and the addresses
// it may dial, in the resolver's order, when allowed.
func (p *Proxy) decide(ctx context.Context, who peer.Who, t target) (verdict, []netip.Addr) {
	pol, reason := p.policies.forPeer(who)
	if pol == nil {
		return verdict{verdict: VerdictDeny, reason: reason}, nil
	}
	if t.name == "" {
		d := pol.DecideWith("", t.addr, t.port, p.opts.HostAddresses)
		if !d.Allow {
			return decided(d, netip.AddrPortFrom(t.addr, t.port)), nil
		}
		return decided(d, netip.AddrPortFrom(t.addr, t.port)), []netip.Addr{t.addr}
	}
	if d, final := pol.Prejudge(t.name, t.port); final {
		return decided(d, netip.AddrPort{}), nil
	}
	rctx, cancel := context.WithTimeout(ctx, p.opts.ResolveTimeout)
	addrs, err := p.opts.Resolver.LookupNetIP(rctx, "ip", t.name)
	cancel()
	if err != nil {
		return verdict{verdict: VerdictError, err: ErrorDNS}, nil
	}
	return p.decideAddresses(pol, t, addrs)
}

// decideAddresses decides each address t's name resolved to: allowed
// when any is, with the first allowed one's verdict; else the first
// refusal's.
func (p *Proxy) decideAddresses(pol *policy.Policy, t target, addrs []netip.Addr) (verdict, []netip.Addr) {
	var (
		allowed []netip.Addr
		v       verdict
		refused *verdict
	)
	for _, a := range addrs {
		a = a.Unmap()
		d := pol.DecideWith(t.name, a, t.port, p.opts.HostAddresses)
		switch {
		case d.Allow && allowed == nil:
			v = decided(d, netip.AddrPortFrom(a, t.port))
		case !d.Allow && refused == nil:
			r := decided(d, netip.AddrPortFrom(a, t.port))
			refused = &r
		}
		if d.Allow {
			allowed = append(allowed, a)
		}
	}
	switch {
	case allowed != nil:
		return v, allowed
	case refused != nil:
		return *refused, nil
	}
	return verdict{verdict: VerdictError, err: ErrorNoAddress}, nil
}

// dial connects to the first of addrs that answers, on t's port, within
// the dial timeout: the connection and its address, or the name of the
// error (dialError) when none answered.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, t target) (net.Conn, netip.AddrPort, string) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	var err error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, t.port)
		var nc net.Conn
		nc, err = p.opts.Dialer.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return nc, ap, ""
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, dialError(err)
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
