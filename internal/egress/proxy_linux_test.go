package egress

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

// wantRecord checks the fields of rec a test cares about.
func wantRecord(t *testing.T, rec *Record, a *agent, protocol, host, verdict, reason string) {
	t.Helper()
	if a != nil && (rec.Scope != a.scope || rec.Profile != a.Profile || rec.Workspace != a.Workspace || rec.Attempt != a.Attempt) {
		t.Errorf("record names %s/%s/%s/%s, want %s/%s/%s/%s", rec.Scope, rec.Profile, rec.Workspace, rec.Attempt,
			a.scope, a.Profile, a.Workspace, a.Attempt)
	}
	if rec.Protocol != protocol || rec.Host != host || rec.Verdict != verdict || rec.Reason != reason {
		t.Errorf("record = %s %s %s %s, want %s %s %s %s", rec.Protocol, rec.Host, rec.Verdict, rec.Reason,
			protocol, host, verdict, reason)
	}
}

func TestConnectTLSThroughTheProxy(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, true)
	h.resolver["example.com"] = loopback4 // the test certificate's name
	h.policies.declare("coder", allow("example.com"))
	a := h.launch("coder", "webapp")

	code, err := h.curl(a.dir, "-x", h.proxyURL(), "--cacert", up.caFile, "https://example.com:"+up.port+"/tls")
	if err != nil || code != "200" {
		t.Fatalf("curl through the proxy = %q, %v; want 200", code, err)
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, a, ProtocolConnect, "example.com", VerdictAllow, "rule")
	if rec.Rule == nil || *rec.Rule != 0 || rec.Address != up.addr || rec.Transport != TransportTCP {
		t.Errorf("record rule %v, address %s, transport %s; want rule 0, %s over tcp", rec.Rule, rec.Address, rec.Transport, up.addr)
	}
	if rec.BytesOut == 0 || rec.BytesIn == 0 {
		t.Errorf("record bytes out %d, in %d: want both counted", rec.BytesOut, rec.BytesIn)
	}
	if rec.PID == 0 || rec.Command != "curl" {
		t.Errorf("record pid %d, command %q: want curl's", rec.PID, rec.Command)
	}
}

func TestPlainHTTPIsForwarded(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, false)
	h.resolver["web.test"] = loopback4
	h.policies.declare("coder", allow("web.test"))
	a := h.launch("coder", "webapp")

	out, err := h.run(a.dir, nil, "curl", "-sS", "--max-time", "10", "-x", h.proxyURL(), "-d", "ping", "http://web.test:"+up.port+"/plain")
	if err != nil || out != "hello from upstream /plain" {
		t.Fatalf("curl = %q, %v", out, err)
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, a, ProtocolHTTP, "web.test", VerdictAllow, "rule")
	if rec.BytesOut != 4 || rec.BytesIn != int64(len(out)) {
		t.Errorf("record bytes out %d, in %d; want 4 and %d", rec.BytesOut, rec.BytesIn, len(out))
	}
}

func TestDeniedReachesNothing(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, false)
	h.resolver["web.test"] = loopback4
	h.resolver["evil.test"] = loopback4
	h.policies.declare("coder", allow("web.test"))
	a := h.launch("coder", "webapp")

	for _, args := range [][]string{
		{"-x", h.proxyURL(), "http://evil.test:" + up.port + "/"},
		{"-x", h.proxyURL(), "-p", "-w", "%{http_connect}", "http://evil.test:" + up.port + "/"}, // CONNECT
	} {
		code, _ := h.curl(a.dir, args...)
		if code != "403" {
			t.Errorf("curl %v = %q, want 403", args, code)
		}
		rec := h.audit.next(t)
		wantRecord(t, rec, a, rec.Protocol, "evil.test", VerdictDeny, "default")
	}
	if n := up.accepted.Load(); n != 0 || h.dialer.dials.Load() != 0 {
		t.Errorf("the upstream accepted %d connections, the proxy dialed %d: a denied destination must see nothing", n, h.dialer.dials.Load())
	}
	ev := h.waitEvent(v1alpha1.KindWorkspace, "webapp", EventDenied)
	if !strings.Contains(ev.Message, a.scope) || !strings.Contains(ev.Message, "profile coder") ||
		!strings.Contains(ev.Message, "evil.test:"+up.port) || ev.Type != v1alpha1.EventWarning {
		t.Errorf("event = %+v, want a Warning naming evil.test:%s, the scope and the profile", ev, up.port)
	}
	// The two denials are one destination: counted, not repeated.
	for {
		evs, changed := h.events.List(reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: "webapp"}, 0)
		if len(evs) == 1 && evs[0].Count == 2 {
			break
		}
		if len(evs) != 1 || evs[0].Count > 2 {
			t.Fatalf("events = %+v, want the two denials counted in one", evs)
		}
		select {
		case <-changed:
		case <-time.After(testutil.Deadline):
			t.Fatalf("events = %+v, want the two denials counted in one", evs)
		}
	}
}

func TestGrandchildIsAttributedToItsAgent(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, false)
	h.resolver["web.test"] = loopback4
	h.policies.declare("coder", allow("web.test"))
	a := h.launch("coder", "webapp")
	// The grandchild also moves into a group of its own below the scope.
	sub := a.dir + "/tool"
	mustMkdir(t, sub)

	cmd := "curl -sS -o /dev/null -w %{http_code} --max-time 10 -x " + h.proxyURL() + " http://web.test:" + up.port + "/"
	code, err := h.run(sub, nil, "sh", "-c", "sh -c '"+cmd+"'")
	if err != nil || code != "200" {
		t.Fatalf("grandchild curl = %q, %v", code, err)
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, a, ProtocolHTTP, "web.test", VerdictAllow, "rule")
	if rec.Command != "curl" {
		t.Errorf("record command %q, want curl", rec.Command)
	}
}

func TestUnscopedIsRefused(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, false)
	h.resolver["web.test"] = loopback4

	code, _ := h.curl("", "-x", h.proxyURL(), "http://web.test:"+up.port+"/")
	if code != "407" {
		t.Errorf("an unscoped curl got %q, want 407", code)
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, nil, ProtocolHTTP, "web.test", VerdictDeny, ReasonUnscoped)
	if rec.Unscoped != UnscopedNone || rec.Scope != "" {
		t.Errorf("record unscoped %q scope %q, want no_scope", rec.Unscoped, rec.Scope)
	}
	out := h.client("", "socks5", "tcp", h.tcp, "web.test", up.port, "x")
	if !strings.HasPrefix(out, "reply 2\n") {
		t.Errorf("an unscoped SOCKS5 client got %q, want reply 2", out)
	}
	h.audit.next(t)

	// Allowed unscoped, it is decided as an agent without rules: the
	// private ranges stay closed.
	h.policies.setUnscoped(v1alpha1.EgressAllow)
	if code, _ := h.curl("", "-x", h.proxyURL(), "http://web.test:"+up.port+"/"); code != "403" {
		t.Errorf("an allowed unscoped curl to loopback got %q, want 403", code)
	}
	wantRecord(t, h.audit.next(t), nil, ProtocolHTTP, "web.test", VerdictDeny, "private_range")
	if up.accepted.Load() != 0 {
		t.Error("the upstream was reached")
	}
}

func TestScopesMarshaldDidNotLaunchCountAsUnscoped(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, false)
	h.resolver["web.test"] = loopback4
	h.policies.declare("coder", allow("web.test"))
	h.policies.declare("permissive", &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow,
		Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressAllow, Hosts: []string{"web.test"}}}})
	real := h.launch("coder", "webapp")

	forged := map[string]*agent{
		// No launch of this ID.
		"no_launch": h.scopeDir("permissive", "0123456789abcdef0123456789abcdef"),
		// The real launch's ID under a permissive name.
		"other_profile": h.scopeDir("permissive", real.ID),
	}
	// The real launch's scope name, somewhere else.
	elsewhere := h.tree.Mounts.V2 + h.tree.Rel + "/elsewhere/" + real.scope
	mustMkdir(t, elsewhere)
	forged["other_path"] = &agent{dir: elsewhere}

	for name, f := range forged {
		t.Run(name, func(t *testing.T) {
			code, _ := h.curl(f.dir, "-x", h.proxyURL(), "http://web.test:"+up.port+"/")
			if code != "407" {
				t.Errorf("curl in a forged scope got %q, want 407", code)
			}
			rec := h.audit.next(t)
			if rec.Unscoped != UnscopedNotLaunched || rec.Scope != "" || rec.Reason != ReasonUnscoped {
				t.Errorf("record = %+v, want unscoped %s", rec, UnscopedNotLaunched)
			}
		})
	}
	h.waitEvent(v1alpha1.KindProfile, "permissive", EventScopeNotLaunched)
	h.waitEvent(v1alpha1.KindProfile, "coder", EventScopeNotLaunched)
	if up.accepted.Load() != 0 {
		t.Error("a forged scope reached the upstream")
	}
}

func TestARuleEditDecidesTheNextConnection(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newHTTPUpstream(t, false)
	h.resolver["web.test"] = loopback4
	h.policies.declare("coder", allow("web.test"))
	a := h.launch("coder", "webapp")
	url := "http://web.test:" + up.port + "/"

	if code, _ := h.curl(a.dir, "-x", h.proxyURL(), url); code != "200" {
		t.Fatalf("before the edit: %q", code)
	}
	h.audit.next(t)
	h.policies.declare("coder", &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow,
		Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressDeny, Hosts: []string{"*.test"}}}})
	if code, _ := h.curl(a.dir, "-x", h.proxyURL(), url); code != "403" {
		t.Fatalf("after the edit: %q, want 403", code)
	}
	rec := h.audit.next(t)
	if rec.Verdict != VerdictDeny || rec.Rule == nil || *rec.Rule != 0 {
		t.Errorf("record after the edit = %+v, want denied by rule 0", rec)
	}
}

func TestSOCKS5Echo(t *testing.T) {
	h := newHarness(t, nil)
	echo := newEchoUpstream(t)
	h.resolver["echo.test"] = loopback4
	h.policies.declare("coder", allow("echo.test"))
	a := h.launch("coder", "webapp")

	for _, network := range []string{"tcp", "unix"} {
		addr := h.tcp
		if network == "unix" {
			addr = h.sock
		}
		out := h.client(a.dir, "socks5", network, addr, "echo.test", echo.port, "marco")
		if out != "reply 0\necho marco\n" {
			t.Errorf("socks5 over %s: %q, want reply 0 and the echo", network, out)
		}
		rec := h.audit.next(t)
		wantRecord(t, rec, a, ProtocolSOCKS5, "echo.test", VerdictAllow, "rule")
		if rec.Transport != network || rec.BytesOut != 5 || rec.BytesIn != 5 || rec.PID == 0 {
			t.Errorf("record transport %s, bytes %d/%d, pid %d; want %s, 5/5 and the client's pid",
				rec.Transport, rec.BytesOut, rec.BytesIn, rec.PID, network)
		}
	}
	// CONNECT over the unix socket too.
	if out := h.client(a.dir, "connect", "unix", h.sock, "echo.test", echo.port, "polo"); out != "status 200\necho polo\n" {
		t.Errorf("CONNECT over unix: %q", out)
	}
	h.audit.next(t)
	if out := h.client(a.dir, "socks5", "tcp", h.tcp, "nope.test", echo.port, "x"); out != "reply 2\n" {
		t.Errorf("a denied SOCKS5 request: %q, want reply 2", out)
	}
	h.audit.next(t)
}

func TestPrivateRangesAreDeniedUnlessNamed(t *testing.T) {
	h := newHarness(t, nil)
	echo := newEchoUpstream(t)
	a := h.launch("coder", "webapp")
	h.resolver["localhost"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	h.resolver["rebind.test"] = loopback4
	h.resolver["metadata.test"] = []netip.Addr{netip.MustParseAddr("169.254.169.254")}
	h.resolver["internal.test"] = []netip.Addr{netip.MustParseAddr("10.1.2.3")}

	everything := &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow,
		Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressAllow, Hosts: []string{"*"}}}}
	h.policies.declare("coder", everything)
	for _, host := range []string{"localhost", "127.0.0.1", "169.254.169.254", "rebind.test", "metadata.test", "internal.test", "[::1]"} {
		out := h.client(a.dir, "connect", "tcp", h.tcp, host, echo.port, "x")
		if out != "status 403\n" {
			t.Errorf("CONNECT %s with everything allowed: %q, want 403", host, out)
		}
		if rec := h.audit.next(t); rec.Reason != "private_range" {
			t.Errorf("%s: reason %q, want private_range", host, rec.Reason)
		}
	}
	if h.dialer.dials.Load() != 0 || echo.accepted.Load() != 0 {
		t.Fatal("a private address was dialed without being named")
	}

	named := &v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, Hosts: []string{"localhost", "rebind.test"}},
		{Action: v1alpha1.EgressAllow, CIDRs: []string{"127.0.0.1/32"}},
	}}
	h.policies.declare("coder", named)
	for _, host := range []string{"localhost", "rebind.test", "127.0.0.1"} {
		out := h.client(a.dir, "connect", "tcp", h.tcp, host, echo.port, "hi")
		if out != "status 200\necho hi\n" {
			t.Errorf("CONNECT %s, named: %q, want 200 and the echo", host, out)
		}
		if rec := h.audit.next(t); rec.Verdict != VerdictAllow || rec.Reason != "rule" {
			t.Errorf("%s named: %+v", host, rec)
		}
	}
}

func TestMalformedRequestsAreRefusedAndClosed(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.HandshakeTimeout = 300 * time.Millisecond
		o.MaxHeaderBytes = 1024
	})
	tests := []struct {
		name, send, want string
	}{
		{"garbage", "\x16\x03\x01 hello\r\n\r\n", "HTTP/1.1 400"},
		{"origin_form", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400"},
		{"https_uri", "GET https://x.test/ HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400"},
		{"connect_without_port", "CONNECT x.test HTTP/1.1\r\nHost: x.test\r\n\r\n", "HTTP/1.1 400"},
		{"connect_port_zero", "CONNECT x.test:0 HTTP/1.1\r\nHost: x.test\r\n\r\n", "HTTP/1.1 400"},
		{"bad_host", "CONNECT a..b:443 HTTP/1.1\r\nHost: a..b\r\n\r\n", "HTTP/1.1 400"},
		{"huge_header", "GET http://x.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", 8192) + "\r\n\r\n", "HTTP/1.1 431"},
		{"socks_no_method", "\x05\x01\x02", "\x05\xff"},
		{"socks_bind", "\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", "\x05\x00\x05\x07"},
		{"socks_bad_address_type", "\x05\x01\x00\x05\x01\x00\x09", "\x05\x00\x05\x08"},
		{"socks4", "\x04\x01\x00\x50\x7f\x00\x00\x01\x00", "\x00\x5b"},
		{"silence", "", ""},
		{"half_a_head", "GET http://x.test/ HTTP/1.1\r\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", h.tcp)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte(tc.send))
			c.SetReadDeadline(time.Now().Add(testutil.Deadline))
			got, err := readAll(c)
			if err != nil {
				t.Fatalf("reading the answer: %v (got %q)", err, got)
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("answer %q, want it to start %q and the connection closed", got, tc.want)
			}
		})
	}
}

// readAll reads c until the proxy closes it.
func readAll(c net.Conn) (string, error) {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if isEOF(err) {
				return b.String(), nil
			}
			return b.String(), err
		}
	}
}

func isEOF(err error) bool {
	return err.Error() == "EOF" || strings.Contains(err.Error(), "connection reset")
}

func TestAPeerGetsABoundedShareOfConnections(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxConnsPerPeer = 2 })
	for range 2 {
		c, err := net.Dial("tcp", h.tcp)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Half a request: the connection is held, its share taken.
		c.Write([]byte("GET http://x.test/ HTTP/1.1\r\n"))
	}
	// The third from the same peer (this process's group) is refused...
	deadline := time.Now().Add(testutil.Deadline)
	for {
		c, err := net.Dial("tcp", h.tcp)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n"))
		c.SetReadDeadline(time.Now().Add(testutil.Deadline))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		// ...once the first two were accepted and counted.
		if time.Now().After(deadline) {
			t.Fatalf("a third connection got %d, want 503", resp.StatusCode)
		}
		h.audit.next(t)
	}
	rec := h.audit.next(t)
	if rec.Reason != ReasonConnectionLimit || rec.Verdict != VerdictDeny {
		t.Errorf("record = %+v, want denied for the connection limit", rec)
	}
}

func TestIdleTunnelsAreClosed(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.IdleTimeout = 300 * time.Millisecond })
	echo := newEchoUpstream(t)
	h.resolver["echo.test"] = loopback4
	h.policies.declare("coder", allow("echo.test"))
	a := h.launch("coder", "webapp")
	// The client sends one byte, then nothing: the proxy closes the
	// tunnel once it carried nothing for the idle timeout, and the
	// client, which waits for that, exits.
	start := time.Now()
	if out := h.client(a.dir, "connect-idle", "tcp", h.tcp, "echo.test", echo.port, "x"); out != "status 200\necho x\nclosed\n" {
		t.Fatalf("idle client: %q", out)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the tunnel closed after %v, before the idle timeout", d)
	}
	if rec := h.audit.next(t); rec.BytesOut != 1 || rec.BytesIn != 1 {
		t.Errorf("record = %+v, want one byte each way", rec)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestFailuresAfterTheDecision(t *testing.T) {
	h := newHarness(t, nil)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close() // nothing listens there now
	h.resolver["gone.test"] = loopback4
	h.policies.declare("coder", allow("gone.test", "nxdomain.test"))
	a := h.launch("coder", "webapp")

	if out := h.client(a.dir, "connect", "tcp", h.tcp, "gone.test", port, "x"); out != "status 502\n" {
		t.Errorf("CONNECT to a closed port: %q, want 502", out)
	}
	if rec := h.audit.next(t); rec.Verdict != VerdictAllow || rec.Error != ErrorRefused {
		t.Errorf("record = %+v, want allowed, then refused", rec)
	}
	if out := h.client(a.dir, "socks5", "tcp", h.tcp, "gone.test", port, "x"); out != "reply 5\n" {
		t.Errorf("SOCKS5 to a closed port: %q, want reply 5", out)
	}
	h.audit.next(t)
	if out := h.client(a.dir, "socks5", "tcp", h.tcp, "nxdomain.test", port, "x"); out != "reply 4\n" {
		t.Errorf("SOCKS5 to a name that does not resolve: %q, want reply 4", out)
	}
	if rec := h.audit.next(t); rec.Verdict != VerdictError || rec.Error != ErrorDNS {
		t.Errorf("record = %+v, want an error: dns_failed", rec)
	}
}

func TestUnixPeersAreIdentifiedByTheirCredentials(t *testing.T) {
	h := newHarness(t, nil)
	echo := newEchoUpstream(t)
	h.resolver["echo.test"] = loopback4
	h.policies.declare("coder", allow("echo.test"))
	forged := h.scopeDir("coder", "fedcba9876543210fedcba9876543210")

	if out := h.client("", "connect", "unix", h.sock, "echo.test", echo.port, "x"); out != "status 407\n" {
		t.Errorf("an unscoped peer on the unix socket: %q, want 407", out)
	}
	if rec := h.audit.next(t); rec.Unscoped != UnscopedNone || rec.Transport != TransportUnix || rec.PID == 0 {
		t.Errorf("record = %+v, want an unscoped unix peer with its pid", rec)
	}
	if out := h.client(forged.dir, "connect", "unix", h.sock, "echo.test", echo.port, "x"); out != "status 407\n" {
		t.Errorf("a forged scope on the unix socket: %q, want 407", out)
	}
	if rec := h.audit.next(t); rec.Unscoped != UnscopedNotLaunched {
		t.Errorf("record = %+v, want scope_not_launched", rec)
	}
}

func TestAnEndedLaunchCountsNoMore(t *testing.T) {
	h := newHarness(t, nil)
	echo := newEchoUpstream(t)
	h.resolver["echo.test"] = loopback4
	h.policies.declare("coder", allow("echo.test"))
	a := h.launch("coder", "webapp")
	if out := h.client(a.dir, "connect", "tcp", h.tcp, "echo.test", echo.port, "x"); out != "status 200\necho x\n" {
		t.Fatalf("while launched: %q", out)
	}
	h.audit.next(t)
	// Its record is gone (the launch was settled), its group is not: the
	// identity remembered for the group counts for nothing now.
	h.launches.remove(a.ID)
	if out := h.client(a.dir, "connect", "tcp", h.tcp, "echo.test", echo.port, "x"); out != "status 407\n" {
		t.Errorf("after the launch ended: %q, want 407", out)
	}
	if rec := h.audit.next(t); rec.Unscoped != UnscopedNotLaunched {
		t.Errorf("record = %+v, want scope_not_launched", rec)
	}
}

// A peer counts as its scope's launch only from the network namespace
// that launch was given: a launch whose namespace is another (standing
// for a netns agent's, which a process of the host's moved into), or not
// made yet, is refused, over TCP and the unix socket, and the record
// names the scope claimed and the launch whose namespace the peer is in.
func TestAPeerOfAnotherNetworkNamespaceBorrowsNoIdentity(t *testing.T) {
	h := newHarness(t, nil)
	echo := newEchoUpstream(t)
	h.resolver["echo.test"] = loopback4
	h.policies.declare("coder", allow("echo.test"))
	h.policies.declare("sandboxed", allow("echo.test"))
	home := h.launch("coder", "webapp") // the peer's own namespace is home's
	other := h.launch("sandboxed", "locked")
	other.NetNS = identity.NetNS{Dev: 1, Ino: 1}
	h.launches.put(other.Launch)
	unmade := h.launch("sandboxed", "locked")
	unmade.NetNS = identity.NetNS{}
	h.launches.put(unmade.Launch)

	for _, tc := range []struct {
		name      string
		a         *agent
		transport []string
	}{
		{"tcp", other, []string{"tcp", h.tcp}},
		{"unix", other, []string{"unix", h.sock}},
		{"not_made", unmade, []string{"unix", h.sock}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"connect"}, tc.transport...), "echo.test", echo.port, "x")
			if out := h.client(tc.a.dir, args[0], args[1:]...); out != "status 407\n" {
				t.Errorf("a peer of another namespace: %q, want 407", out)
			}
			rec := h.audit.next(t)
			if rec.Unscoped != UnscopedOtherNetNS || rec.Claimed != tc.a.scope || rec.Namespace != home.scope || rec.Scope != "" {
				t.Errorf("record = %+v, want %s claiming %s from %s's namespace", rec, UnscopedOtherNetNS, tc.a.scope, home.scope)
			}
		})
	}
	h.waitEvent(v1alpha1.KindProfile, "sandboxed", EventScopeNotLaunched)
	if out := h.client(home.dir, "connect", "unix", h.sock, "echo.test", echo.port, "x"); out != "status 200\necho x\n" {
		t.Errorf("a peer in its own launch's namespace: %q, want the echo", out)
	}
}
