package egress

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
)

// connKey and upstreamKey are context keys: the connection a request
// came on, and the upstream connection a forwarded request goes out on.
type (
	connKey     struct{}
	upstreamKey struct{}
)

// httpServer serves the connections whose first request is a plain HTTP
// one: net/http reads their requests, each handed to serveHTTP, and
// forwards those allowed.
type httpServer struct {
	srv     *http.Server
	reverse http.Handler
	// conns hands the server the connections the proxy found to speak
	// HTTP.
	conns *connListener
}

func (p *Proxy) newHTTPServer() *httpServer {
	return &httpServer{
		srv: &http.Server{
			Handler:           http.HandlerFunc(p.serveHTTP),
			ReadHeaderTimeout: p.opts.HandshakeTimeout,
			IdleTimeout:       p.opts.KeepAlive,
			MaxHeaderBytes:    p.opts.MaxHeaderBytes,
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, c)
			},
			ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		},
		reverse: p.newReverseProxy(),
		conns:   newConnListener(),
	}
}

// serve serves the connections handed to it until close, with ctx as
// every request's base.
func (s *httpServer) serve(ctx context.Context) error {
	s.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	if err := s.srv.Serve(s.conns); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// hand gives c to the server, and reports false once it stopped.
func (s *httpServer) hand(c net.Conn) bool { return s.conns.hand(c) }

// stopTaking takes no more connections; close closes those it serves.
func (s *httpServer) stopTaking() { s.conns.Close() }
func (s *httpServer) close()      { s.srv.Close() }

// newReverseProxy forwards plain HTTP requests on the connection that
// decide and dial made, one request per connection: the upstream is
// never reused for a request it was not decided for.
func (p *Proxy) newReverseProxy() http.Handler {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			up, ok := ctx.Value(upstreamKey{}).(*upstream)
			if !ok || !up.taken.CompareAndSwap(false, true) {
				return nil, errors.New("egress: no decided connection for this request")
			}
			return up.Conn, nil
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		ForceAttemptHTTP2:      false,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The outbound request keeps the absolute URL and Host it
			// was asked for; hop-by-hop and Proxy-* headers are gone.
			// The Host header is the URI's authority (RFC 9112, 3.2.2).
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", pr.In.URL.Host, ""
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if up, ok := r.Context().Value(upstreamKey{}).(*upstream); ok {
				up.failed = true
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}

// upstream is a decided connection for one forwarded request.
type upstream struct {
	net.Conn
	taken atomic.Bool
	// failed says the request could not be forwarded on it; set and read
	// on the request's goroutine.
	failed bool
}

// forward sends a plain HTTP request on the decided connection and the
// response back, counting the bytes of their bodies.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c *conn, up net.Conn) carried {
	u := &upstream{Conn: up}
	out := &countingReader{r: r.Body}
	r2 := r.WithContext(context.WithValue(r.Context(), upstreamKey{}, u))
	if r.Body != nil && r.Body != http.NoBody {
		r2.Body = out
	}
	p.lookForOwner(c)
	cw := &countingWriter{ResponseWriter: w, before: c.awaitOwner}
	p.web.reverse.ServeHTTP(cw, r2)
	up.Close() // when the transport never took it
	got := carried{out: out.n.Load(), in: cw.n}
	if u.failed {
		got.failed = ErrorDial
	}
	p.countBytes(c.who.Profile, got.out, got.in)
	return got
}

// countingReader counts a request body as the transport sends it, from
// a goroutine of its own that may outlive the request.
type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// countingWriter counts the body bytes of a response; Unwrap lets
// http.ResponseController reach the flusher and hijacker beneath.
type countingWriter struct {
	http.ResponseWriter
	n int64
	// before runs once, before the response's first byte.
	before func()
}

func (c *countingWriter) first() {
	if c.before != nil {
		c.before()
		c.before = nil
	}
}

func (c *countingWriter) WriteHeader(code int) {
	c.first()
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.first()
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// connListener is a net.Listener fed by hand: the HTTP server serves
// the connections the proxy found to speak HTTP.
type connListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to the server, and reports false once it stopped.
func (l *connListener) hand(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closer.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.UnixAddr{Name: "egress", Net: "unix"} }
