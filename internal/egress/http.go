package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveFirst is the HTTP front-end of a connection: it reads its first
// request. A CONNECT, the common case, is handed to handle on the
// connection itself, without a hand-over to net/http; any other request
// goes to the HTTP server with every byte read so far given back, to be
// read again, and that server hands each request to serveHTTP. full says
// the peer's share of connections is taken: the request is read and
// refused.
func (p *Proxy) serveFirst(ctx context.Context, c *conn, full bool) {
	head := &recording{r: c}
	br := bufio.NewReaderSize(io.LimitReader(head, int64(p.opts.MaxHeaderBytes)+1), 4096)
	r, err := http.ReadRequest(br)
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
	if !full && r.Method != http.MethodConnect {
		c.peeked = head.b
		c.SetReadDeadline(time.Time{})
		if !p.web.hand(c) {
			c.Close()
		}
		return
	}
	req, err := httpRequest(r, full)
	f := &httpFront{p: p, c: c, br: br, t: req.target}
	if !full {
		f.badTarget = err
	}
	p.handle(ctx, c, req, f)
}

// serveHTTP is the HTTP front-end of a request the HTTP server read.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	req, err := httpRequest(r, false)
	p.handle(r.Context(), c, req, &httpFront{p: p, c: c, w: w, r: r, t: req.target, badTarget: err})
}

// httpRequest reads r into a request: CONNECT's authority, or a plain
// request's absolute http:// URI, or the error that says why neither is
// there.
func httpRequest(r *http.Request, full bool) (request, error) {
	req := request{protocol: ProtocolHTTP, full: full}
	if r.Method == http.MethodConnect {
		req.protocol = ProtocolConnect
	}
	t, err := httpTarget(r)
	if err != nil {
		req.badTarget = ErrorBadHost
		if r.Method != http.MethodConnect && !r.URL.IsAbs() {
			req.badTarget = ErrorBadRequest
		}
		return req, err
	}
	req.target, req.host, req.port = t, t.host, t.port
	return req, nil
}

// httpFront answers and carries an HTTP request: on the connection
// itself (w nil: a first CONNECT, whose head br read), or through the
// HTTP server (w and r).
type httpFront struct {
	p  *Proxy
	c  *conn
	br *bufio.Reader
	w  http.ResponseWriter
	r  *http.Request
	t  target
	// badTarget is why the request names no destination, answered 400.
	badTarget error
}

// refuse answers with the status that says why and closes the
// connection.
func (f *httpFront) refuse(rec *Record) {
	status, msg, h := http.StatusBadRequest, "", http.Header(nil)
	if f.badTarget != nil {
		msg = f.badTarget.Error()
	} else {
		status, msg, h = refusal(rec, f.t)
	}
	if f.w != nil {
		refuse(f.w, status, msg, h)
		return
	}
	writeStatus(f.c, status, msg, h)
	f.c.Close()
}

// carry tunnels a CONNECT, or forwards a plain request.
func (f *httpFront) carry(up net.Conn, check helloCheck) carried {
	switch {
	case f.w == nil:
		return f.p.established(f.c, up, f.br, check)
	case f.r.Method == http.MethodConnect:
		return f.p.serveConnect(f.w, f.c, up, check)
	}
	return f.p.forward(f.w, f.r, f.c, up)
}

// serveConnect answers CONNECT with 200 and tunnels, the client's
// connection taken over from the HTTP server.
func (p *Proxy) serveConnect(w http.ResponseWriter, c *conn, up net.Conn, check helloCheck) carried {
	rc := http.NewResponseController(w)
	_, brw, err := rc.Hijack()
	if err != nil {
		up.Close()
		refuse(w, http.StatusInternalServerError, "cannot tunnel on this connection", nil)
		return carried{failed: ErrorDial}
	}
	return p.established(c, up, brw.Reader, check)
}

// established answers 200 to a CONNECT and tunnels; br holds what the
// client sent after its request and was read ahead; check, when not nil,
// reads the ClientHello first.
func (p *Proxy) established(c *conn, up net.Conn, br *bufio.Reader, check helloCheck) carried {
	if _, err := io.WriteString(c.Conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		c.Close()
		return carried{}
	}
	c.SetReadDeadline(time.Time{})
	p.lookForOwner(c)
	var early []byte
	if n := br.Buffered(); n > 0 {
		early, _ = br.Peek(n)
	}
	return p.tunnel(c, up, early, check)
}

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
