//go:build linux

package test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// clientEnv, when set, makes the test binary a SOCKS5 client, run as an
// agent: it reads the proxy from ALL_PROXY, as tools do, asks it for the
// host and port in the arguments, sends the payload and prints the echo.
const clientEnv = "MARSHAL_E2E_SOCKS_CLIENT"

func runClient(string) int {
	if err := socksClient(os.Getenv("ALL_PROXY"), os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Println("error", err)
		return 2
	}
	return 0
}

func socksClient(proxy, host, port, payload string) error {
	u, err := url.Parse(proxy)
	if err != nil || u.Scheme != "socks5h" {
		return fmt.Errorf("ALL_PROXY %q: want socks5h://", proxy)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	c.Write([]byte{5, 1, 0})
	var b [10]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return err
	}
	p, _ := strconv.Atoi(port)
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...)
	c.Write(binary.BigEndian.AppendUint16(req, uint16(p)))
	if _, err := io.ReadFull(r, b[:10]); err != nil {
		return err
	}
	if b[1] != 0 {
		fmt.Printf("reply %d\n", b[1])
		return nil
	}
	c.Write([]byte(payload))
	echo := make([]byte, len(payload))
	if _, err := io.ReadFull(r, echo); err != nil {
		return err
	}
	fmt.Printf("echo %s\n", echo)
	return nil
}

// upstream is a server on loopback that counts the connections it saw.
type upstream struct {
	port     string
	accepted atomic.Int64
}

// counting counts the connections ln accepts.
type counting struct {
	net.Listener
	n *atomic.Int64
}

func (c counting) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err == nil {
		c.n.Add(1)
	}
	return conn, err
}

// serve starts an upstream on loopback: HTTP, HTTPS with cert, or a TCP
// echo when handler is nil.
func serve(t *testing.T, handler http.Handler, cert *tls.Certificate) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, handler, cert)
}

// serveOn is serve on ln, which it closes when t ends.
func serveOn(t *testing.T, ln net.Listener, handler http.Handler, cert *tls.Certificate) *upstream {
	t.Helper()
	u := &upstream{}
	_, u.port, _ = net.SplitHostPort(ln.Addr().String())
	cl := counting{ln, &u.accepted}
	var wg sync.WaitGroup
	if handler == nil {
		wg.Go(func() {
			for {
				c, err := cl.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { defer c.Close(); io.Copy(c, c) })
			}
		})
		t.Cleanup(func() { ln.Close(); wg.Wait() })
		return u
	}
	srv := &http.Server{Handler: handler}
	var l net.Listener = cl
	if cert != nil {
		l = tls.NewListener(cl, &tls.Config{Certificates: []tls.Certificate{*cert}})
	}
	wg.Go(func() { srv.Serve(l) })
	t.Cleanup(func() { srv.Close(); wg.Wait() })
	return u
}

// selfSigned makes a certificate for localhost and 127.0.0.1, and writes
// it where curl's --cacert can read it.
func selfSigned(t *testing.T) (*tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// egressEnv is a marshald whose profile coder declares egress to the
// upstreams, and the upstreams.
type egressEnv struct {
	*daemon
	root           string
	web, tls, echo *upstream
	closed         *upstream // allowed nowhere
	ca             string
	proxyAddr      string
}

const egressWorkspace = `---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: webapp}
spec:
  root: %s
  profile: coder
`

// policy is profile coder's egress: localhost by name on the web and TLS
// ports, the echo by CIDR, and the default.
func (e *egressEnv) policy(deflt string, extra ...string) string {
	rules := fmt.Sprintf(`      - {action: allow, hosts: [localhost], ports: [%s, %s]}
      - {action: allow, cidrs: [127.0.0.1/32], ports: [%s]}
`, e.web.port, e.tls.port, e.echo.port)
	for _, r := range extra {
		rules = "      - " + r + "\n" + rules
	}
	return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder}
spec:
  egress:
    default: %s
    rules:
%s`, deflt, rules) + fmt.Sprintf(egressWorkspace, e.root)
}

func newEgressEnv(t *testing.T) *egressEnv {
	t.Helper()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("needs curl")
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) })
	cert, ca := selfSigned(t)
	e := &egressEnv{daemon: newDaemon(t), root: t.TempDir(), ca: ca}
	e.web, e.tls, e.echo = serve(t, hello, nil), serve(t, hello, cert), serve(t, nil, nil)
	e.closed = serve(t, hello, cert)
	e.write("coder.yaml", e.policy("deny"))
	e.start("--egress-address", "127.0.0.1:0")
	e.waitReady("webapp")
	var info localapi.Info
	if err := json.Unmarshal(e.get(localapi.InfoPath), &info); err != nil || info.Egress == nil || info.Egress.Address == "" {
		t.Fatalf("info %+v, %v: want the egress proxy's address", info.Egress, err)
	}
	e.proxyAddr = info.Egress.Address
	return e
}

// records waits until the audit log holds n records that match, and
// returns them: an allowed connection's record is written when it ends,
// which may be after its client has exited.
func (e *egressEnv) records(n int, match func(localapi.EgressRecord) bool) []localapi.EgressRecord {
	e.t.Helper()
	l := e.watchLines("egress", "log", "-f", "-o", "json")
	var found []localapi.EgressRecord
	testutil.Eventually(e.t, l.wake, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		found = nil
		for _, line := range l.all {
			var r localapi.EgressRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				e.t.Fatalf("egress log line %q: %v", line, err)
			}
			if match(r) {
				found = append(found, r)
			}
		}
		return len(found) >= n
	}, fmt.Sprintf("%d audit records", n))
	return found
}

// record waits for the audit record of host:port, and fails when there is
// more than one.
func (e *egressEnv) record(host, port string) localapi.EgressRecord {
	e.t.Helper()
	found := e.records(1, func(r localapi.EgressRecord) bool { return r.Host == host && strconv.Itoa(int(r.Port)) == port })
	if len(found) != 1 {
		e.t.Fatalf("audit records of %s:%s: %+v, want one", host, port, found)
	}
	return found[0]
}

var scopeRE = regexp.MustCompile(`marshal-coder-[0-9a-f]{32}\.scope`)

// scopeOf finds the scope an agent printed with cat /proc/self/cgroup.
func scopeOf(t testing.TB, out string) string {
	t.Helper()
	s := scopeRE.FindString(out)
	if s == "" {
		t.Fatalf("no scope in the agent's output:\n%s", out)
	}
	return s
}

// curl is the curl command line of an agent: status code only.
func curl(args ...string) string {
	return "curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 10 " + strings.Join(args, " ")
}

func TestEgressThroughTheProxy(t *testing.T) {
	e := newEgressEnv(t)

	// HTTPS through CONNECT, with the proxy from HTTPS_PROXY, by name.
	r := e.runNow("-w", "webapp", "--", "sh", "-c", "cat /proc/self/cgroup; "+
		curl("--cacert", e.ca, "https://localhost:"+e.tls.port+"/tls"))
	if r.code != 0 || !strings.HasSuffix(r.stdout, "200\n") {
		t.Fatalf("curl https through the proxy: %+v", r)
	}
	scope := scopeOf(t, r.stdout)
	rec := e.record("localhost", e.tls.port)
	if rec.Verdict != "allow" || rec.Protocol != "connect" || rec.Scope != scope || rec.Profile != "coder" ||
		rec.Workspace != "webapp" || rec.Command != "curl" || rec.BytesIn == 0 || rec.Rule == nil || *rec.Rule != 0 {
		t.Errorf("audit record %+v, want curl's allowed CONNECT by rule 0 in %s", rec, scope)
	}

	// Plain HTTP, forwarded, from a grandchild.
	r = e.runNow("-w", "webapp", "--", "sh", "-c", "cat /proc/self/cgroup; sh -c \"sh -c \\\""+
		curl("http://localhost:"+e.web.port+"/plain")+"\\\"\"")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "200\n") {
		t.Fatalf("curl http from a grandchild: %+v", r)
	}
	if rec := e.record("localhost", e.web.port); rec.Verdict != "allow" || rec.Protocol != "http" || rec.Scope != scopeOf(t, r.stdout) {
		t.Errorf("the grandchild's record %+v, want its agent's scope", rec)
	}

	// A TCP echo through SOCKS5, from ALL_PROXY.
	self, _ := os.Executable()
	r = e.runNow("-w", "webapp", "--", "env", clientEnv+"=1", self, "127.0.0.1", e.echo.port, "marco")
	if r.code != 0 || r.stdout != "echo marco\n" {
		t.Fatalf("socks5 echo: %+v", r)
	}
	if rec := e.record("127.0.0.1", e.echo.port); rec.Verdict != "allow" || rec.Protocol != "socks5" || rec.BytesOut != 5 || rec.BytesIn != 5 {
		t.Errorf("socks5 record %+v", rec)
	}

	// Denied: refused, and the upstream saw nothing.
	r = e.runNow("-w", "webapp", "--", "sh", "-c", "cat /proc/self/cgroup; "+
		curl("-w '%{http_connect}\\n'", "--cacert", e.ca, "https://localhost:"+e.closed.port+"/"))
	if !strings.Contains(r.stdout, "403") {
		t.Errorf("a denied CONNECT: %+v, want 403", r)
	}
	if n := e.closed.accepted.Load(); n != 0 {
		t.Errorf("the denied upstream accepted %d connections", n)
	}
	scope = scopeOf(t, r.stdout)
	rec = e.record("localhost", e.closed.port)
	if rec.Verdict != "deny" || rec.Reason != "default" || rec.Scope != scope || rec.Workspace != "webapp" || rec.Profile != "coder" {
		t.Errorf("the denial's record %+v, want it to name %s, coder and webapp", rec, scope)
	}
	evs := e.mustCtl("events", "--for", "workspace/webapp")
	if !strings.Contains(evs, "EgressDenied") || !strings.Contains(evs, scope) || !strings.Contains(evs, "profile coder") ||
		!strings.Contains(evs, "localhost:"+e.closed.port) {
		t.Errorf("events of webapp:\n%s\nwant EgressDenied naming localhost:%s, %s and profile coder", evs, e.closed.port, scope)
	}
	if got := e.metric(`marshal_egress_connections_total{profile="coder",verdict="allow"}`); got != 3 {
		t.Errorf("allowed connections counted %v, want 3", got)
	}
	if got := e.metric(`marshal_egress_connections_total{profile="coder",verdict="deny"}`); got != 1 {
		t.Errorf("denied connections counted %v, want 1", got)
	}

	// A process marshald did not launch is refused.
	out, err := runOutside("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
		"-x", "http://"+e.proxyAddr, "http://localhost:"+e.web.port+"/")
	if out != "407" {
		t.Errorf("an unscoped curl: %q %v, want 407", out, err)
	}
	if n := e.web.accepted.Load(); n != 1 {
		t.Errorf("the web upstream accepted %d connections, want the grandchild's only", n)
	}
}

// runOutside runs a command in the test's own group, outside any scope,
// without proxy variables, and returns its output.
func runOutside(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	return string(out), err
}

// session is a long-running agent that runs each line it reads with sh
// and prints "done" after it: one agent, many connections.
type session struct {
	t   testing.TB
	a   *agent
	out *fsnotify.Watcher
	n   int
}

func (e *egressEnv) session() *session {
	e.t.Helper()
	a := e.startRun("-w", "webapp", "--", "sh", "-c", `cat /proc/self/cgroup; while read -r line; do sh -c "$line"; echo done; done`)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { w.Close() })
	if err := w.Add(a.stdout.Name()); err != nil {
		e.t.Fatal(err)
	}
	s := &session{t: e.t, a: a, out: w}
	s.wait()
	return s
}

// wait waits until the agent printed its nth "done" (0: its cgroup), and
// returns its output.
func (s *session) wait() string {
	s.t.Helper()
	var out string
	testutil.Eventually(s.t, s.out.Events, func() bool {
		out, _ = s.a.output()
		return strings.Count(out, "done\n") >= s.n && scopeRE.MatchString(out)
	}, fmt.Sprintf("the agent's output %d", s.n))
	return out
}

// do runs line in the agent and returns what it printed for it.
func (s *session) do(line string) string {
	s.t.Helper()
	before, _ := s.a.output()
	if _, err := io.WriteString(s.a.stdin, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
	s.n++
	return strings.TrimPrefix(s.wait(), before)
}

func (s *session) scope() string {
	out, _ := s.a.output()
	return scopeOf(s.t, out)
}

func TestEgressRuleEditDecidesTheNextConnection(t *testing.T) {
	e := newEgressEnv(t)
	profiles := e.watch("profiles")
	s := e.session()
	url := "http://localhost:" + e.web.port + "/"
	if got := s.do(curl(url)); got != "200\ndone\n" {
		t.Fatalf("before the edit: %q", got)
	}
	e.write("coder.yaml", e.policy("deny", "{action: deny, hosts: [localhost], ports: ["+e.web.port+"]}"))
	profiles.until(t, "coder", "the edit observed", generationIs(2))
	if got := s.do(curl(url)); got != "403\ndone\n" {
		t.Errorf("after the edit: %q, want 403", got)
	}
	if n := e.web.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want the first only", n)
	}
}

func TestEgressAttributionSurvivesARestart(t *testing.T) {
	e := newEgressEnv(t)
	s := e.session()
	url := "http://localhost:" + e.web.port + "/"
	if got := s.do(curl(url)); got != "200\ndone\n" {
		t.Fatalf("before the restart: %q", got)
	}
	// The agent keeps the address it was given: marshald must be found
	// there again.
	e.stop()
	e.start("--egress-address", e.proxyAddr)
	e.waitReady("webapp")
	if got := s.do(curl(url)); got != "200\ndone\n" {
		t.Fatalf("after the restart: %q", got)
	}
	recs := e.records(2, func(localapi.EgressRecord) bool { return true })
	if len(recs) != 2 {
		t.Fatalf("records %+v, want two", recs)
	}
	for _, r := range recs {
		if r.Verdict != "allow" || r.Scope != s.scope() || r.Workspace != "webapp" || r.Attempt == "" && r.Scope == "" {
			t.Errorf("record %+v, want allowed for %s in webapp", r, s.scope())
		}
	}
}

func TestEgressPrivateRangesNeedANamingRule(t *testing.T) {
	e := newEgressEnv(t)
	profiles := e.watch("profiles")
	s := e.session()
	// Everything is allowed but by a wildcard: no private address is
	// reached. 169.254.169.254 is refused before any dial.
	e.write("coder.yaml", `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder}
spec:
  egress:
    default: allow
    rules:
      - {action: allow, hosts: ["*"]}
`+fmt.Sprintf(egressWorkspace, e.root))
	profiles.until(t, "coder", "the edit observed", generationIs(2))
	for _, host := range []string{"localhost", "127.0.0.1", "169.254.169.254"} {
		if got := s.do(curl("http://" + host + ":" + e.web.port + "/")); got != "403\ndone\n" {
			t.Errorf("%s with everything allowed: %q, want 403", host, got)
		}
		if rec := e.record(host, e.web.port); rec.Reason != "private_range" {
			t.Errorf("%s: %+v, want denied as a private range", host, rec)
		}
	}
	if n := e.web.accepted.Load(); n != 0 {
		t.Fatalf("a private address was reached: %d connections", n)
	}
	// Named, exactly or by CIDR, they are reached.
	e.write("coder.yaml", e.policy("deny", "{action: allow, cidrs: [127.0.0.1/32], ports: ["+e.web.port+"]}"))
	profiles.until(t, "coder", "the second edit observed", generationIs(3))
	for _, host := range []string{"localhost", "127.0.0.1"} {
		if got := s.do(curl("http://" + host + ":" + e.web.port + "/")); got != "200\ndone\n" {
			t.Errorf("%s named: %q, want 200", host, got)
		}
	}
}
