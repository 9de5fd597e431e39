package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// connKey and upstreamKey are context keys: the connection a request
// came on, and the upstream connection a forwarded request goes out on.
type (
	connKey     struct{}
	upstreamKey struct{}
)

func (p *Proxy) newHTTPServer() *http.Server {
	return &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: p.opts.HandshakeTimeout,
		IdleTimeout:       p.opts.KeepAlive,
		MaxHeaderBytes:    p.opts.MaxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
}

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
			if rec, ok := r.Context().Value(recordKey{}).(*Record); ok && rec.Error == "" {
				rec.Error = ErrorDial
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}

// upstream is a decided connection for one forwarded request.
type upstream struct {
	net.Conn
	taken atomic.Bool
}

type recordKey struct{}

// httpTarget reads the destination of an HTTP proxy request: CONNECT's
// authority, or a plain request's absolute http:// URI.
func httpTarget(r *http.Request) (target, error) {
	if r.Method == http.MethodConnect {
		host, port, err := splitHostPort(r.Host, 0)
		if err != nil {
			return target{}, err
		}
		return newTarget(ProtocolConnect, host, port)
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		return target{}, errors.New("not a proxy request: the request line needs an absolute http:// URI")
	}
	if r.URL.Scheme != "http" {
		return target{}, fmt.Errorf("scheme %q: only http:// is forwarded; tunnel anything else with CONNECT", r.URL.Scheme)
	}
	host, port, err := splitHostPort(r.URL.Host, 80)
	if err != nil {
		return target{}, err
	}
	return newTarget(ProtocolHTTP, host, port)
}

// splitHostPort splits host:port, with port dflt when it is missing and
// dflt is not 0. The port must be from 1 to 65535.
func splitHostPort(hostport string, dflt uint16) (string, uint16, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		if dflt == 0 || strings.Count(hostport, ":") > 0 && !strings.HasSuffix(hostport, "]") {
			return "", 0, fmt.Errorf("%q: want host:port", hostport)
		}
		return hostport, dflt, nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("%q: the port must be from 1 to 65535", hostport)
	}
	return host, uint16(n), nil
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	rec := p.newRecord(c, ProtocolHTTP)
	if r.Method == http.MethodConnect {
		rec.Protocol = ProtocolConnect
	}
	t, err := httpTarget(r)
	if err != nil {
		rec.Verdict, rec.Error = VerdictError, ErrorBadRequest
		if r.Method == http.MethodConnect || r.URL.IsAbs() {
			rec.Error = ErrorBadHost
		}
		p.finish(c, rec)
		refuse(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	rec.Host, rec.Port = t.host, t.port
	nc := p.open(r.Context(), c, t, rec)
	if nc == nil {
		// Audited before it is answered: a client told no finds it in
		// the log already.
		p.finish(c, rec)
		status, msg, h := refusal(rec, t)
		refuse(w, status, msg, h)
		return
	}
	if t.protocol == ProtocolConnect {
		p.serveConnect(w, c, nc, rec, p.helloCheck(c, t, rec))
		return
	}
	p.forward(w, r, c, nc, rec)
}

// refusal is the answer to a request rec says is not allowed, or could
// not be decided or connected: 407 to a peer in no launch (the proxy does
// not know who it is), 403 to a denial, 502 or 504 to a failure.
func refusal(rec *Record, t target) (int, string, http.Header) {
	h := http.Header{}
	h.Set("X-Marshal-Egress", strings.TrimSpace(rec.Verdict+" "+rec.Reason+" "+rec.Error))
	switch {
	case rec.Error == ErrorTimeout:
		return http.StatusGatewayTimeout, fmt.Sprintf("%s: %s", t.hostPort(), rec.Error), h
	case rec.Verdict == VerdictError || rec.Verdict == VerdictAllow:
		return http.StatusBadGateway, fmt.Sprintf("%s: %s", t.hostPort(), rec.Error), h
	case rec.Reason == ReasonUnscoped:
		h.Set("Proxy-Authenticate", `Marshal realm="marshal egress"`)
		return http.StatusProxyAuthRequired,
			fmt.Sprintf("%s: this process is in no scope marshald launched (%s); run it with marshalctl run", t.hostPort(), rec.Unscoped), h
	case rec.Reason == ReasonConnectionLimit:
		return http.StatusServiceUnavailable, "too many connections from this peer", h
	}
	msg := fmt.Sprintf("%s denied", t.hostPort())
	if rec.Profile != "" {
		msg += " for profile " + rec.Profile
	}
	return http.StatusForbidden, msg + ": " + describeReason(rec), h
}

// describeReason says in words what decided rec.
func describeReason(rec *Record) string {
	switch {
	case rec.Rule != nil:
		return "rule " + strconv.Itoa(*rec.Rule)
	case rec.Reason == "private_range":
		return "a private address (" + rec.Address + ") that no rule names"
	case rec.Reason == "host_address":
		return "an address of this host (" + rec.Address + ") that no rule names"
	case rec.Reason == ReasonSNIMismatch:
		return "its TLS ClientHello named another server (" + rec.SNI + ")"
	case rec.Reason == ReasonNoProfile:
		return "the profile is not declared"
	}
	return rec.Reason
}

// refuse writes a refusal and closes the connection after it.
func refuse(w http.ResponseWriter, status int, msg string, h http.Header) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	io.WriteString(w, "marshal egress: "+msg+"\n")
}

// writeStatus writes a whole HTTP/1.1 response with msg as its body on a
// connection the http.Server does not serve.
func writeStatus(w io.Writer, status int, msg string, h http.Header) error {
	body := "marshal egress: " + msg + "\n"
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_, err := io.WriteString(w, b.String())
	return err
}

// serveConnect answers CONNECT with 200 and tunnels, the client's
// connection taken over from the http.Server.
func (p *Proxy) serveConnect(w http.ResponseWriter, c *conn, up net.Conn, rec *Record, check helloCheck) {
	rc := http.NewResponseController(w)
	_, brw, err := rc.Hijack()
	if err != nil {
		up.Close()
		rec.Error = ErrorDial
		refuse(w, http.StatusInternalServerError, "cannot tunnel on this connection", nil)
		p.finish(c, rec)
		return
	}
	p.established(c, up, brw.Reader, rec, check)
}

// established answers 200 to a CONNECT and tunnels; br holds what the
// client sent after its request and was read ahead; check, when not nil,
// reads the ClientHello first.
func (p *Proxy) established(c *conn, up net.Conn, br *bufio.Reader, rec *Record, check helloCheck) {
	if _, err := io.WriteString(c.Conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		c.Close()
		p.finish(c, rec)
		return
	}
	c.SetReadDeadline(time.Time{})
	p.lookForOwner(c)
	var early []byte
	if n := br.Buffered(); n > 0 {
		early, _ = br.Peek(n)
	}
	rec.BytesOut, rec.BytesIn = p.tunnel(c, up, early, rec.Profile, check)
	p.finish(c, rec)
}

// serveFirst reads the first request of a connection that speaks HTTP.
// A CONNECT, the common case, is served here on the connection itself,
// without a hand-over to net/http; any other request goes to the
// http.Server with every byte read so far given back, to be read again.
// full says the peer's share of connections is taken: the request is
// read and refused.
func (p *Proxy) serveFirst(ctx context.Context, c *conn, full bool) {
	head := &recording{r: c}
	br := bufio.NewReaderSize(io.LimitReader(head, int64(p.opts.MaxHeaderBytes)+1), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		var ne net.Error
		switch {
		case head.n > p.opts.MaxHeaderBytes:
			writeStatus(c, http.StatusRequestHeaderFieldsTooLarge, "the request head is too large", nil)
		case errors.As(err, &ne) && ne.Timeout(), head.n <= 1 && errors.Is(err, io.EOF):
			// Silence, or a peer that left: nothing to answer.
		default:
			writeStatus(c, http.StatusBadRequest, "malformed request", nil)
		}
		c.Close()
		return
	}
	if !full && req.Method != http.MethodConnect {
		c.peeked = head.b
		c.SetReadDeadline(time.Time{})
		if !p.httpConns.hand(c) {
			c.Close()
		}
		return
	}
	rec := p.newRecord(c, ProtocolHTTP)
	if req.Method == http.MethodConnect {
		rec.Protocol = ProtocolConnect
	}
	t, err := httpTarget(req)
	switch {
	case full:
		rec.Verdict, rec.Reason = VerdictDeny, ReasonConnectionLimit
		if err == nil {
			rec.Host, rec.Port = t.host, t.port
		}
	case err != nil:
		rec.Verdict, rec.Error = VerdictError, ErrorBadHost
		p.finish(c, rec)
		writeStatus(c, http.StatusBadRequest, err.Error(), nil)
		c.Close()
		return
	default:
		rec.Host, rec.Port = t.host, t.port
		if up := p.open(ctx, c, t, rec); up != nil {
			p.established(c, up, br, rec, p.helloCheck(c, t, rec))
			return
		}
	}
	p.finish(c, rec)
	status, msg, h := refusal(rec, t)
	writeStatus(c, status, msg, h)
	c.Close()
}

// recording reads from r and keeps what it read.
type recording struct {
	r io.Reader
	b []byte
	n int
}

func (r *recording) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.b = append(r.b, p[:n]...)
	r.n += n
	return n, err
}

// forward sends a plain HTTP request on the decided connection and the
// response back, counting the bytes of their bodies.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c *conn, up net.Conn, rec *Record) {
	ctx := context.WithValue(r.Context(), upstreamKey{}, &upstream{Conn: up})
	ctx = context.WithValue(ctx, recordKey{}, rec)
	out := &countingReader{r: r.Body}
	r2 := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		r2.Body = out
	}
	p.lookForOwner(c)
	cw := &countingWriter{ResponseWriter: w, before: c.awaitOwner}
	p.reverse.ServeHTTP(cw, r2)
	up.Close() // when the transport never took it
	rec.BytesOut, rec.BytesIn = out.n.Load(), cw.n
	p.countBytes(rec.Profile, rec.BytesOut, rec.BytesIn)
	p.finish(c, rec)
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
