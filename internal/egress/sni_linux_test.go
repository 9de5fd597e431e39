package egress

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// tlsUpstream is an HTTPS server on loopback (its certificate names
// example.com) that reports, for each connection, how many bytes it read
// from it once it was closed.
type tlsUpstream struct {
	port   string
	caFile string
	read   chan int64
}

func newTLSUpstream(t testing.TB) *tlsUpstream {
	t.Helper()
	u := &tlsUpstream{read: make(chan int64, 64)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over TLS")
	}))
	srv.Listener = readCountingListener{srv.Listener, u.read}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused tunnels' handshakes fail
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, u.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	u.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(u.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return u
}

// nextRead returns how many bytes the upstream read from its next
// connection to end.
func (u *tlsUpstream) nextRead(t testing.TB) int64 {
	t.Helper()
	select {
	case n := <-u.read:
		return n
	case <-time.After(testutil.Deadline):
		t.Fatal("no connection to the upstream ended")
		return 0
	}
}

type readCountingListener struct {
	net.Listener
	read chan<- int64
}

func (l readCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &readCountingConn{Conn: c, read: l.read}, nil
}

// readCountingConn counts what is read from it, and reports the count
// once, when the server closes it (a TLS server closes on close_notify
// without reading to the end, and after a failed handshake).
type readCountingConn struct {
	net.Conn
	n    atomic.Int64
	read chan<- int64
	once sync.Once
}

func (c *readCountingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *readCountingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.read <- c.n.Load() })
	return err
}

func TestConnectSNIMustNameTheHost(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newTLSUpstream(t)
	h.resolver["example.com"] = loopback4
	h.resolver["front.test"] = loopback4
	h.policies.declare("coder", allow("example.com", "front.test"))
	a := h.launch("coder", "webapp")
	url := "https://example.com:" + up.port + "/"

	// SNI as the CONNECT host, in another case and with a trailing dot.
	code, err := h.curl(a.dir, "-x", h.proxyURL(), "--cacert", up.caFile, "https://EXAMPLE.com.:"+up.port+"/")
	if err != nil || code != "200" {
		t.Fatalf("curl with a matching SNI = %q, %v; want 200", code, err)
	}
	wantRecord(t, h.audit.next(t), a, ProtocolConnect, "example.com", VerdictAllow, "rule")
	if n := up.nextRead(t); n == 0 {
		t.Fatal("the upstream read nothing of an allowed tunnel")
	}

	// Domain fronting: CONNECT front.test, a ClientHello for example.com.
	code, _ = h.curl(a.dir, "-x", h.proxyURL(), "--cacert", up.caFile,
		"--connect-to", "example.com:"+up.port+":front.test:"+up.port, url)
	if code == "200" {
		t.Fatal("a tunnel to front.test carried a ClientHello for example.com")
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, a, ProtocolConnect, "front.test", VerdictDeny, ReasonSNIMismatch)
	if rec.SNI != "example.com" || rec.BytesOut != 0 {
		t.Errorf("record sni %q, bytes out %d; want example.com and none", rec.SNI, rec.BytesOut)
	}
	if n := up.nextRead(t); n != 0 {
		t.Errorf("the upstream read %d bytes of a refused tunnel, want none: no ClientHello", n)
	}
	ev := h.waitEvent(v1alpha1.KindWorkspace, "webapp", EventDenied)
	if ev.Type != v1alpha1.EventWarning || !strings.Contains(ev.Message, "front.test") || !strings.Contains(ev.Message, "example.com") {
		t.Errorf("event = %+v, want a Warning naming front.test and the SNI", ev)
	}
}

func TestConnectToAnAddressDecidesTheSNI(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	up := newTLSUpstream(t)
	h.policies.declare("coder", &v1alpha1.EgressSpec{Default: v1alpha1.EgressDeny, Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressDeny, Hosts: []string{"evil.test"}},
		{Action: v1alpha1.EgressAllow, CIDRs: []string{"127.0.0.1/32"}},
	}})
	a := h.launch("coder", "webapp")
	to := func(name string) []string {
		return []string{"-x", h.proxyURL(), "--cacert", up.caFile, "-k",
			"--connect-to", name + ":" + up.port + ":127.0.0.1:" + up.port, "https://" + name + ":" + up.port + "/"}
	}

	if code, err := h.curl(a.dir, to("example.com")...); err != nil || code != "200" {
		t.Fatalf("curl to 127.0.0.1 with SNI example.com = %q, %v; want 200", code, err)
	}
	wantRecord(t, h.audit.next(t), a, ProtocolConnect, "127.0.0.1", VerdictAllow, "rule")
	up.nextRead(t)

	if code, _ := h.curl(a.dir, to("evil.test")...); code == "200" {
		t.Fatal("a tunnel to 127.0.0.1 carried a ClientHello for a denied name")
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, a, ProtocolConnect, "127.0.0.1", VerdictDeny, ReasonSNIMismatch)
	if rec.SNI != "evil.test" {
		t.Errorf("record sni %q, want evil.test", rec.SNI)
	}
	if n := up.nextRead(t); n != 0 {
		t.Errorf("the upstream read %d bytes of a refused tunnel, want none", n)
	}
}

func TestPlainHTTPHostIsTheURLs(t *testing.T) {
	needCurl(t)
	h := newHarness(t, nil)
	hosts := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	h.resolver["web.test"] = loopback4
	h.policies.declare("coder", allow("web.test"))
	a := h.launch("coder", "webapp")

	code, err := h.curl(a.dir, "-x", h.proxyURL(), "-H", "Host: evil.test", "http://web.test:"+port+"/")
	if err != nil || code != "200" {
		t.Fatalf("curl = %q, %v; want 200", code, err)
	}
	if got, want := <-hosts, "web.test:"+port; got != want {
		t.Errorf("the upstream saw Host %q, want the URL's authority %q", got, want)
	}
	wantRecord(t, h.audit.next(t), a, ProtocolHTTP, "web.test", VerdictAllow, "rule")
}

func TestHelloIsReadForConnectAndSOCKSTo443(t *testing.T) {
	p, err := New(Options{Launches: &launchTable{}, Policies: &policyTable{}, CgroupMount: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		protocol string
		port     uint16
		read     bool
	}{
		{ProtocolConnect, 443, true},
		{ProtocolConnect, 8443, true},
		{ProtocolConnect, 22, true},
		{ProtocolSOCKS5, 443, true},
		{ProtocolSOCKS5, 8443, false},
		{ProtocolSOCKS5, 22, false},
	} {
		if got := p.helloCheck(&conn{}, target{protocol: tc.protocol, name: "a.test", port: tc.port}) != nil; got != tc.read {
			t.Errorf("%s to port %d: ClientHello read %v, want %v", tc.protocol, tc.port, got, tc.read)
		}
	}
}

// BenchmarkTunnelSNI measures what reading the ClientHello adds to a
// tunnel's setup: CONNECT by name, 200, a real ClientHello sent and
// echoed back by the upstream, with the check and without, in alternate
// rounds of one run. Target: added p50 ≤ 20 µs.
func BenchmarkTunnelSNI(b *testing.B) {
	pb := newProxyBench(b, nil)
	pb.h.resolver["example.com"] = loopback4
	pb.enterScope(b)
	hello := benchClientHello(b, "example.com")
	target := "example.com:" + pb.echo.port
	echo := make([]byte, len(hello))
	round := func() time.Duration {
		start := time.Now()
		c := pb.connect(b, target)
		if _, err := c.Write(hello); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, echo); err != nil {
			b.Fatalf("the ClientHello did not come back: %v", err)
		}
		d := time.Since(start)
		c.Close()
		return d
	}
	var with, without latencies
	for b.Loop() {
		pb.h.proxy.skipHello.Store(true)
		without = append(without, round())
		pb.h.proxy.skipHello.Store(false)
		with = append(with, round())
	}
	without.report(b, "without")
	with.report(b, "with")
	b.ReportMetric(float64((with.p50()-without.p50()).Nanoseconds())/1e3, "added-p50-µs")
}

// benchClientHello is the ClientHello crypto/tls sends for serverName.
func benchClientHello(b *testing.B, serverName string) []byte {
	b.Helper()
	c1, c2 := net.Pipe()
	done := make(chan []byte)
	go func() {
		buf := make([]byte, 16<<10)
		n, _ := c2.Read(buf)
		c2.Close()
		done <- buf[:n]
	}()
	tls.Client(c1, &tls.Config{ServerName: serverName}).Handshake()
	c1.Close()
	return <-done
}

func TestSOCKS5To443SNIMustNameTheHost(t *testing.T) {
	needCurl(t)
	// Port 443 is listened on in a namespace of the test's own, which
	// the proxy dials into.
	ns := testutil.NewNetNamespace(t)
	up := &tlsUpstream{read: make(chan int64, 64), port: "443"}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over TLS")
	}))
	srv.Listener.Close()
	srv.Listener = readCountingListener{ns.Listen(t, "tcp", "127.0.0.1:443"), up.read}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	up.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(up.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	dialer := &nsDialer{t: t, ns: ns, only: loopback4[0]}
	h := newHarness(t, func(o *Options) { o.Dialer = dialer })
	h.resolver["example.com"] = loopback4
	h.resolver["front.test"] = loopback4
	h.policies.declare("coder", &v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, Hosts: []string{"example.com", "front.test"}, Ports: []int32{443}}}})
	a := h.launch("coder", "webapp")
	socks := "socks5h://" + h.tcp

	if code, err := h.curl(a.dir, "-x", socks, "--cacert", up.caFile, "https://example.com/"); err != nil || code != "200" {
		t.Fatalf("curl through SOCKS5 with a matching SNI = %q, %v; want 200", code, err)
	}
	wantRecord(t, h.audit.next(t), a, ProtocolSOCKS5, "example.com", VerdictAllow, "rule")
	up.nextRead(t)

	if code, _ := h.curl(a.dir, "-x", socks, "--cacert", up.caFile, "--connect-to", "example.com:443:front.test:443", "https://example.com/"); code == "200" {
		t.Fatal("a SOCKS5 tunnel to front.test:443 carried a ClientHello for example.com")
	}
	rec := h.audit.next(t)
	wantRecord(t, rec, a, ProtocolSOCKS5, "front.test", VerdictDeny, ReasonSNIMismatch)
	if rec.SNI != "example.com" {
		t.Errorf("record sni %q, want example.com", rec.SNI)
	}
	if n := up.nextRead(t); n != 0 {
		t.Errorf("the upstream read %d bytes of a refused tunnel, want none", n)
	}
}
