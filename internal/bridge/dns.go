package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/marshal-dev/marshal/internal/acceptloop"
	"github.com/marshal-dev/marshal/internal/egress/policy"
)

// Bounds of the resolver.
const (
	// MaxDNSMessage is the largest query read; a larger one is dropped.
	// A question of one name of 255 bytes, with EDNS, is far less.
	MaxDNSMessage = 1232
	// MaxQueriesInFlight bounds the queries being answered at once; one
	// past it is dropped, and its client asks again.
	MaxQueriesInFlight = 64
	// MaxNames bounds the names given a placeholder address.
	MaxNames = 4096
	// QueryTimeout bounds asking the proxy about a name.
	QueryTimeout = 5 * time.Second
	// answerTTL is how long a client may keep an answer, in seconds:
	// short, so that a change of the rules is soon seen.
	answerTTL = 30
)

// placeholders is where the proxy's answers lie (the proxy's
// PlaceholderPrefix): the bridge listens only there.
var placeholders = netip.MustParsePrefix("127.77.0.0/16")

// DefaultPlaceholderPorts are the ports a placeholder address is
// listened on.
var DefaultPlaceholderPorts = []uint16{80, 443}

// DNSOptions configure ServeDNS.
type DNSOptions struct {
	// Socket is the proxy's unix socket.
	Socket string
	// Ports are the ports listened on at each name's placeholder
	// address; DefaultPlaceholderPorts when nil.
	Ports []uint16
}

// ServeDNS answers DNS queries on pc until ctx ends: an A or AAAA
// question for a name the proxy allows (asked with SOCKS5 RESOLVE) is
// answered with the name's placeholder address (A) or no record (AAAA),
// one it refuses with NXDOMAIN, anything else with REFUSED. Each
// answered name's placeholder is listened on, on opts.Ports, and what
// connects there is carried to the proxy as a SOCKS5 CONNECT to the
// name and port. It closes pc, the listeners and every connection when
// ctx ends, waits for them and returns nil, or an error when pc fails
// first.
func ServeDNS(ctx context.Context, pc net.PacketConn, opts DNSOptions) error {
	if opts.Ports == nil {
		opts.Ports = DefaultPlaceholderPorts
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &dnsServer{
		ctx:    ctx,
		opts:   opts,
		relays: &relays{conns: map[net.Conn]struct{}{}},
		sem:    make(chan struct{}, MaxQueriesInFlight),
		byName: map[string]netip.Addr{},
		byAddr: map[netip.Addr]string{},
	}
	stop := context.AfterFunc(ctx, func() {
		pc.Close()
		s.stop()
	})
	defer stop()
	var err error
	buf := make([]byte, MaxDNSMessage+1)
	for {
		n, from, rerr := pc.ReadFrom(buf)
		if rerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("bridge: reading queries on %s: %w", pc.LocalAddr(), rerr)
			}
			break
		}
		if n > MaxDNSMessage {
			continue
		}
		select {
		case s.sem <- struct{}{}:
		default:
			continue
		}
		query := bytes.Clone(buf[:n])
		s.wg.Go(func() {
			defer func() { <-s.sem }()
			if resp := s.answer(ctx, query); resp != nil {
				pc.WriteTo(resp, from)
			}
		})
	}
	cancel()
	pc.Close()
	s.stop()
	s.wg.Wait()
	s.relays.wg.Wait()
	return err
}

// dnsServer is the resolver and the placeholders' listeners.
type dnsServer struct {
	// ctx is ServeDNS's: it ends the listeners and their connections.
	ctx    context.Context
	opts   DNSOptions
	relays *relays
	sem    chan struct{}
	// wg counts the queries being answered and the listeners' loops.
	wg sync.WaitGroup
	// mu guards the fields that follow.
	mu        sync.Mutex
	byName    map[string]netip.Addr
	byAddr    map[netip.Addr]string
	listeners []net.Listener
	stopped   bool
}

// stop closes the listeners and every connection; none is made after.
func (s *dnsServer) stop() {
	s.mu.Lock()
	s.stopped = true
	lns := s.listeners
	s.listeners = nil
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	s.relays.closeAll()
}

// answer is the response to query, nil when none is due (it is not a
// query, or cannot be read far enough to answer).
func (s *dnsServer) answer(ctx context.Context, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return reply(h, nil, dnsmessage.RCodeFormatError, nil)
	}
	if h.OpCode != 0 || len(qs) != 1 {
		return reply(h, qs, dnsmessage.RCodeRefused, nil)
	}
	q := qs[0]
	if q.Class != dnsmessage.ClassINET || q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeAAAA {
		return reply(h, qs, dnsmessage.RCodeRefused, nil)
	}
	name, _, err := policy.ParseHost(q.Name.String())
	if err != nil || name == "" {
		return reply(h, qs, dnsmessage.RCodeRefused, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	addr, err := s.resolve(ctx, name)
	switch {
	case errors.Is(err, errNotAllowed):
		return reply(h, qs, dnsmessage.RCodeNameError, nil)
	case err != nil:
		return reply(h, qs, dnsmessage.RCodeServerFailure, nil)
	case q.Type == dnsmessage.TypeAAAA:
		return reply(h, qs, dnsmessage.RCodeSuccess, nil)
	}
	a := addr.As4()
	return reply(h, qs, dnsmessage.RCodeSuccess, &dnsmessage.AResource{A: a})
}

// reply builds the response to a query of header h and questions qs.
func reply(h dnsmessage.Header, qs []dnsmessage.Question, rcode dnsmessage.RCode, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, RCode: rcode,
	})
	b.EnableCompression()
	b.StartQuestions()
	for _, q := range qs {
		if b.Question(q) != nil {
			return nil
		}
	}
	if a != nil {
		b.StartAnswers()
		rh := dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: answerTTL}
		if b.AResource(rh, *a) != nil {
			return nil
		}
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}

// resolve asks the proxy about name, and returns the name's placeholder
// address when it is allowed: the proxy's, or the next free one when
// another name holds that. The proxy is asked every time, so that every
// question is audited and decided on the rules of the moment.
func (s *dnsServer) resolve(ctx context.Context, name string) (netip.Addr, error) {
	c, addr, err := socksRequest(ctx, s.opts.Socket, socksResolve, name, 0)
	if err != nil {
		return netip.Addr{}, err
	}
	c.Close()
	if !placeholders.Contains(addr) {
		// Only placeholders are listened on: never a real address.
		return netip.Addr{}, fmt.Errorf("bridge: the proxy answered %s, no placeholder", addr)
	}
	return s.place(name, addr)
}

// place gives name a placeholder address, want when it is free, and
// listens there.
func (s *dnsServer) place(name string, want netip.Addr) (netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.byName[name]; ok {
		return a, nil
	}
	if s.stopped {
		return netip.Addr{}, net.ErrClosed
	}
	if len(s.byName) >= MaxNames {
		return netip.Addr{}, fmt.Errorf("bridge: %d names have placeholders already", MaxNames)
	}
	a := want
	for s.byAddr[a] != "" || !usable(a) {
		if a = a.Next(); !placeholders.Contains(a) {
			a = placeholders.Addr()
		}
	}
	s.byName[name], s.byAddr[a] = a, name
	for _, port := range s.opts.Ports {
		// A port that cannot be had (taken, or privileged where the
		// bridge may not bind it) is not listened on: connections
		// there are refused, and the proxy's variables still work.
		ln, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
		if err != nil {
			continue
		}
		s.listeners = append(s.listeners, ln)
		s.wg.Go(func() { s.accept(s.ctx, ln, name, port) })
	}
	return a, nil
}

// usable says whether a may be a placeholder: not the range's first or
// last address.
func usable(a netip.Addr) bool {
	b := a.As4()
	return !(b[2] == 0 && b[3] == 0 || b[2] == 255 && b[3] == 255)
}

// accept carries each connection to ln to the proxy as a CONNECT to
// name and port, until ln is closed.
func (s *dnsServer) accept(ctx context.Context, ln net.Listener, name string, port uint16) {
	acceptloop.Run(ctx, ln, nil, func(c net.Conn) bool {
		if !s.relays.track(c) {
			c.Close()
			return false
		}
		s.relays.wg.Go(func() { s.carry(ctx, c, name, port) })
		return true
	})
}

// carry asks the proxy to CONNECT to name:port for c, and relays c there
// once it is allowed; c is closed when it is not.
func (s *dnsServer) carry(ctx context.Context, c net.Conn, name string, port uint16) {
	defer s.relays.forget(c)
	up, _, err := socksRequest(ctx, s.opts.Socket, socksConnect, name, port)
	if err != nil {
		return
	}
	if !s.relays.track(up) {
		up.Close()
		return
	}
	defer s.relays.forget(up)
	join(c, up)
}
