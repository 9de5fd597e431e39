package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/marshal-dev/marshal/internal/httpserve"
)

// Timeouts of the TCP metrics server: a scraper sends its request at
// once and reads the answer promptly.
const (
	readHeaderTimeout = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 5 * time.Second
)

// ListenTCP listens on addr ("127.0.0.1:9090", "[::1]:9090",
// "localhost:9090") for Serve. It refuses, with an error wrapping
// ErrNotLoopback, an address that could be reached from another host: an
// IP that is not loopback, an empty host (every interface), or a name that
// resolves to any address that is not loopback. A name is resolved once
// and its first address is the one listened on, so what is checked is
// what is bound.
func ListenTCP(ctx context.Context, addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: want HOST:PORT, such as 127.0.0.1:9090: %w", addr, err)
	}
	ip, err := loopbackIP(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip.String(), port))
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	return ln, nil
}

// loopbackIP returns the loopback address host names, or an error
// wrapping ErrNotLoopback.
func loopbackIP(ctx context.Context, host string) (netip.Addr, error) {
	const hint = "metrics are served over TCP only on loopback (127.0.0.1, ::1, localhost); " +
		"scrape the unix socket's /metrics, or put a proxy in front, to reach them from elsewhere"
	if host == "" {
		return netip.Addr{}, fmt.Errorf("no host means every interface: %w; %s", ErrNotLoopback, hint)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" || !ip.Unmap().IsLoopback() {
			return netip.Addr{}, fmt.Errorf("%s: %w; %s", host, ErrNotLoopback, hint)
		}
		return ip.Unmap(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolving %s: %w", host, err)
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%s resolves to no address: %w; %s", host, ErrNotLoopback, hint)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return netip.Addr{}, fmt.Errorf("%s resolves to %s: %w; %s", host, ip, ErrNotLoopback, hint)
		}
	}
	return ips[0].Unmap(), nil
}

// Serve answers GET /metrics on ln (from ListenTCP) until ctx ends, then
// lets scrapes in flight finish and returns nil. It closes ln. It returns
// an error only when ln fails first.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.handler)
	srv := &http.Server{
		Handler:           mux,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
	}
	if err := httpserve.Serve(ctx, srv, ln, shutdownTimeout, nil); err != nil {
		return fmt.Errorf("serving metrics: %w", err)
	}
	return nil
}
