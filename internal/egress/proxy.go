package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/acceptloop"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/egress/policy"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/peer"
)

// Defaults of Options.
const (
	DefaultMaxConns         = 4096
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultResolveTimeout   = 5 * time.Second
	DefaultDialTimeout      = 10 * time.Second
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultKeepAlive        = 60 * time.Second
	DefaultMaxHeaderBytes   = 32 << 10
)

// Policies is where the proxy reads the rules, at every decision.
type Policies interface {
	// Egress returns the egress policy profile declares, nil when it
	// declares none, with the profile's generation; ok is false when the
	// profile is not declared.
	Egress(profile string) (spec *v1alpha1.EgressSpec, generation int64, ok bool)
	// Unscoped returns the Host's spec.egress.unscoped, "" when the Host
	// does not say.
	Unscoped() v1alpha1.EgressAction
}

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer dials destinations; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Auditor keeps the record of every decision.
type Auditor interface {
	Audit(r *Record)
}

// Metrics counts what the proxy decides and carries; *metrics.Metrics
// is one. Profile is "" for a peer in no launch; verdict is allow, deny
// or error.
type Metrics interface {
	ObserveEgress(profile, verdict string, decision time.Duration)
	AddEgressBytes(profile string, out, in int64)
}

// Options configure a Proxy. Launches and Policies are required.
type Options struct {
	Launches Launches
	Policies Policies
	// CgroupMount is the cgroup2 mount point, which launches' paths are
	// relative to. Found in /proc/self/mountinfo by default.
	CgroupMount string
	// NetNS is the network namespace the TCP listeners are in, and so
	// every TCP peer: this process's by default.
	NetNS identity.NetNS
	// Resolver resolves destination names; net.DefaultResolver by
	// default.
	Resolver Resolver
	// Dialer dials destinations; a net.Dialer by default.
	Dialer Dialer
	// HostAddresses, when set, are the addresses of the host's own
	// interfaces, refused (host_address) unless a rule names them.
	HostAddresses policy.HostAddresses
	// Audit, when set, receives every decision.
	Audit Auditor
	// Events, when set, is told of denials and of scopes marshald did
	// not launch, as aggregated Warning events.
	Events EventRecorder
	// Metrics, when set, counts decisions and bytes.
	Metrics Metrics
	// Clock stamps records; the real clock by default.
	Clock clock.PassiveClock
	// MaxConns bounds the connections open at once; DefaultMaxConns by
	// default. MaxConnsPerPeer bounds those of one launch (or, for a
	// peer in none, of one cgroup or user); a quarter of MaxConns by
	// default.
	MaxConns        int
	MaxConnsPerPeer int
	// HandshakeTimeout bounds reading a request: a SOCKS handshake, an
	// HTTP request's head. DefaultHandshakeTimeout by default.
	HandshakeTimeout time.Duration
	// ResolveTimeout and DialTimeout bound resolving a destination and
	// connecting to it.
	ResolveTimeout time.Duration
	DialTimeout    time.Duration
	// IdleTimeout closes a tunnel that carried nothing either way for
	// that long; DefaultIdleTimeout by default. KeepAlive closes an HTTP
	// connection idle between requests; DefaultKeepAlive by default.
	IdleTimeout time.Duration
	KeepAlive   time.Duration
	// MaxHeaderBytes bounds an HTTP request's head.
	MaxHeaderBytes int
	// Logger receives what goes wrong; discarded by default.
	Logger *slog.Logger
}

// Proxy is marshald's egress proxy: one listener serves HTTP forward
// requests, CONNECT and SOCKS5, and each connection is decided on the
// rules of the launch its peer belongs to. Create it with New and run it
// with Run.
type Proxy struct {
	opts     Options
	log      *slog.Logger
	ident    *peer.Identifier
	policies *policyCache
	events   *aggregator
	// web serves the connections whose first request is plain HTTP.
	web *httpServer
	// skipHello turns the check of tunnels' ClientHello off, for
	// benchmarks that measure what it costs.
	skipHello atomic.Bool

	// mu guards the fields that follow.
	mu      sync.Mutex
	conns   map[*conn]struct{}
	perPeer map[string]int
	stopped bool
	// wg counts the goroutines of connections.
	wg sync.WaitGroup
}

// New returns a Proxy; Run serves it.
func New(opts Options) (*Proxy, error) {
	if opts.Launches == nil || opts.Policies == nil {
		return nil, fmt.Errorf("Launches and Policies are required: %w", ErrInvalidOptions)
	}
	if opts.CgroupMount == "" {
		m, err := cgroup.ReadMounts()
		if err != nil {
			return nil, fmt.Errorf("egress: %w", err)
		}
		opts.CgroupMount = m.V2
	}
	if opts.NetNS.IsZero() {
		// Outside Linux there is none, and no peer is identified.
		opts.NetNS, _ = identity.SelfNetNS()
	}
	defaults(&opts)
	p := &Proxy{
		opts:     opts,
		log:      opts.Logger,
		ident:    peer.NewIdentifier(opts.CgroupMount, opts.Launches, opts.NetNS),
		policies: &policyCache{src: opts.Policies, byProfile: map[string]cachedPolicy{}},
		conns:    map[*conn]struct{}{},
		perPeer:  map[string]int{},
	}
	if opts.Events != nil {
		p.events = newAggregator(opts.Events, opts.Clock)
	}
	p.web = p.newHTTPServer()
	return p, nil
}

func defaults(o *Options) {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{Timeout: o.DialTimeout}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxConnsPerPeer <= 0 {
		o.MaxConnsPerPeer = max(1, o.MaxConns/4)
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.ResolveTimeout <= 0 {
		o.ResolveTimeout = DefaultResolveTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run serves the listeners until ctx ends, then closes them and every
// connection, waits for their goroutines and returns nil. It returns an
// error, once everything stopped, when a listener fails first.
func (p *Proxy) Run(ctx context.Context, lns ...net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer p.ident.Close()
	var wg sync.WaitGroup
	errs := make(chan error, len(lns)+1)
	wg.Go(func() {
		if err := p.web.serve(ctx); err != nil {
			errs <- fmt.Errorf("egress: serving http: %w", err)
			cancel()
		}
	})
	if p.events != nil {
		wg.Go(func() { p.events.run(ctx) })
	}
	for _, ln := range lns {
		wg.Go(func() {
			if err := p.accept(ctx, ln); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	<-ctx.Done()
	for _, ln := range lns {
		ln.Close()
	}
	p.web.stopTaking()
	p.mu.Lock()
	p.stopped = true
	open := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
	}
	p.mu.Unlock()
	p.web.close()
	for _, c := range open {
		c.Close()
	}
	wg.Wait()
	p.wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// accept accepts connections on ln until ctx ends. A temporary failure
// (out of file descriptors) is waited out, as net/http does.
func (p *Proxy) accept(ctx context.Context, ln net.Listener) error {
	retrying := func(err error, wait time.Duration) {
		p.log.Warn("egress: accepting a connection", "err", err, "retry_in", wait)
	}
	err := acceptloop.Run(ctx, ln, retrying, func(nc net.Conn) bool {
		c := &conn{Conn: nc, p: p, accepted: p.opts.Clock.Now()}
		if !p.track(c) {
			nc.Close()
			return false
		}
		p.wg.Go(func() { p.serve(ctx, c) })
		return true
	})
	if err != nil {
		return fmt.Errorf("egress: accepting on %s: %w", ln.Addr(), err)
	}
	return nil
}

// track registers c, and reports false once the proxy is stopping.
func (p *Proxy) track(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// acquire takes one of the connections of key's share, and reports false
// when the proxy or that share is full.
func (p *Proxy) acquire(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) > p.opts.MaxConns || p.perPeer[key] >= p.opts.MaxConnsPerPeer {
		return false
	}
	p.perPeer[key]++
	return true
}

// forget unregisters c and gives back its share.
func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	if c.key != "" {
		if p.perPeer[c.key]--; p.perPeer[c.key] <= 0 {
			delete(p.perPeer, c.key)
		}
	}
}

// serve identifies c's peer, tells its protocol by the first byte and
// hands it to that protocol's front-end: SOCKS5 or HTTP.
func (p *Proxy) serve(ctx context.Context, c *conn) {
	pr, who, err := p.ident.Identify(c.Conn)
	if err != nil {
		p.log.Warn("egress: connection not identified", "err", err)
		c.Close()
		return
	}
	c.peer, c.who = pr, who
	if (who.Unscoped == UnscopedNotLaunched || who.Unscoped == UnscopedOtherNetNS) && p.events != nil {
		p.events.notLaunched(who)
	}
	c.SetReadDeadline(time.Now().Add(p.opts.HandshakeTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c.Conn, first[:]); err != nil {
		c.Close()
		return
	}
	c.peeked = first[:]
	full := !p.acquire(who.Key(pr))
	if !full {
		c.key = who.Key(pr)
	}
	switch first[0] {
	case socks5Version:
		c.peeked = nil
		p.serveSOCKS(ctx, c, full)
	case socks4Version:
		// A SOCKS4 client gets SOCKS4's refusal, not an HTTP error.
		c.Write([]byte{0, 0x5b, 0, 0, 0, 0, 0, 0})
		c.Close()
	default:
		p.serveFirst(ctx, c, full)
	}
}

// conn is an accepted connection and what is known of its peer.
type conn struct {
	net.Conn
	p        *Proxy
	accepted time.Time
	// peeked holds the bytes read to tell the protocol, which Read
	// returns first.
	peeked []byte
	peer   *peer.Peer
	who    peer.Who
	// key is the peer's share the connection holds, "" when none.
	key string
	// owner, when set, says which process holds the peer's socket.
	owner func() (int, string)
	once  sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	if len(c.peeked) > 0 {
		n := copy(b, c.peeked)
		c.peeked = c.peeked[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// Close closes the connection and gives back its share, once.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.p.forget(c) })
	return err
}
