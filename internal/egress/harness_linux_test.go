package egress

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

// launchTable is marshald's record of launches, as a table the test
// writes.
type launchTable struct {
	mu sync.Mutex
	m  map[string]Launch
}

func (l *launchTable) Launch(id string) (Launch, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	x, ok := l.m[id]
	return x, ok
}

func (l *launchTable) Launches() []Launch {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Launch, 0, len(l.m))
	for _, x := range l.m {
		out = append(out, x)
	}
	return out
}

func (l *launchTable) put(x Launch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[x.ID] = x
}

func (l *launchTable) remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
}

// policyTable is the declared profiles' egress and the Host's, as the
// test declares them; each change is a new generation, as in the
// desired store.
type policyTable struct {
	mu       sync.Mutex
	specs    map[string]*v1alpha1.EgressSpec
	gens     map[string]int64
	unscoped v1alpha1.EgressAction
}

func (p *policyTable) Egress(profile string) (*v1alpha1.EgressSpec, int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	spec, ok := p.specs[profile]
	return spec, p.gens[profile], ok
}

func (p *policyTable) Unscoped() v1alpha1.EgressAction {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unscoped
}

func (p *policyTable) declare(profile string, spec *v1alpha1.EgressSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.specs[profile] = spec
	p.gens[profile]++
}

func (p *policyTable) setUnscoped(a v1alpha1.EgressAction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unscoped = a
}

// mapResolver answers from a table: names the test controls, so that no
// lookup leaves the machine.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// loopbackDialer dials only loopback addresses: a test that asks for
// anything else fails, and nothing is sent.
type loopbackDialer struct {
	t     testing.TB
	d     net.Dialer
	dials atomic.Int64
}

func (l *loopbackDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().IsLoopback() {
		l.t.Errorf("the proxy dialed %s, which is not loopback", address)
		return nil, errors.New("test: only loopback is dialed")
	}
	l.dials.Add(1)
	return l.d.DialContext(ctx, network, address)
}

// records collects audit records.
type records struct {
	ch chan *Record
}

func (r *records) Audit(rec *Record) {
	cp := *rec
	r.ch <- &cp
}

// next returns the next audit record, failing t after a deadline.
func (r *records) next(t testing.TB) *Record {
	t.Helper()
	select {
	case rec := <-r.ch:
		return rec
	case <-time.After(testutil.Deadline):
		t.Fatal("no audit record")
		return nil
	}
}

// harness runs a proxy on a TCP loopback listener and a unix socket,
// with scopes in a private cgroup tree.
type harness struct {
	t        testing.TB
	tree     *testutil.CgroupTree
	launches *launchTable
	policies *policyTable
	resolver mapResolver
	dialer   *loopbackDialer
	audit    *records
	events   *events.Recorder
	proxy    *Proxy
	tcp      string
	sock     string
}

func newHarness(t testing.TB, tweak func(*Options)) *harness {
	t.Helper()
	tree := testutil.NewCgroupTree(t)
	h := &harness{
		t: t, tree: tree,
		launches: &launchTable{m: map[string]Launch{}},
		policies: &policyTable{specs: map[string]*v1alpha1.EgressSpec{}, gens: map[string]int64{}},
		resolver: mapResolver{},
		dialer:   &loopbackDialer{t: t},
		audit:    &records{ch: make(chan *Record, 1024)},
	}
	h.events, _ = events.New(events.Options{})
	opts := Options{
		Launches: h.launches, Policies: h.policies, CgroupMount: tree.Mounts.V2,
		Resolver: h.resolver, Dialer: h.dialer, Audit: h.audit, Events: h.events,
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = p
	tl, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.tcp = tl.Addr().String()
	h.sock = filepath.Join(testutil.ShortDir(t), "egress.sock")
	ul, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, tl, ul) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// agent is a scope of the tree that marshald launched, or one it did not.
type agent struct {
	Launch
	scope string // unit name
	dir   string // absolute
}

// launch makes the scope of a launch of profile in workspace and records
// it.
func (h *harness) launch(profile, workspace string) *agent {
	h.t.Helper()
	a := h.scopeDir(profile, scope.NewID())
	a.Workspace, a.Attempt = workspace, a.ID
	h.launches.put(a.Launch)
	return a
}

// scopeDir makes a group named as the scope of launch id of profile,
// without recording a launch.
func (h *harness) scopeDir(profile, id string) *agent {
	h.t.Helper()
	rel := filepath.Join(h.tree.Rel, scope.RootSlice, scope.SliceName(profile), scope.ScopeName(profile, id))
	dir := h.tree.Mounts.V2 + rel
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	ns, err := identity.SelfNetNS()
	if err != nil {
		h.t.Fatal(err)
	}
	return &agent{Launch: Launch{ID: id, Profile: profile, Path: rel, NetNS: ns}, scope: scope.ScopeName(profile, id), dir: dir}
}

// run runs argv in the cgroup dir ("" for the test's own) with a minimal
// environment and returns its standard output; it fails t when argv
// cannot start or runs past the deadline.
func (h *harness) run(dir string, env []string, argv ...string) (string, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if dir != "" {
		f, err := os.Open(dir)
		if err != nil {
			h.t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr = cgroupAttr(int(f.Fd()))
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		h.t.Fatalf("%s ran past %v: %s", strings.Join(argv, " "), testutil.Deadline, stderr.String())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// client runs the test binary as a proxy client in dir.
func (h *harness) client(dir, mode string, args ...string) string {
	h.t.Helper()
	out, err := h.run(dir, []string{clientEnv + "=" + mode}, append([]string{os.Args[0]}, args...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// curl runs curl in dir through the proxy and returns the HTTP status it
// got, or its exit error.
func (h *harness) curl(dir string, args ...string) (string, error) {
	h.t.Helper()
	return h.run(dir, nil, append([]string{"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"}, args...)...)
}

func (h *harness) proxyURL() string { return "http://" + h.tcp }

// server is an HTTP, HTTPS or TCP echo server on loopback that counts
// what reached it.
type server struct {
	addr     string
	port     string
	accepted atomic.Int64
	caFile   string
}

func needCurl(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
}

// countingListener counts the connections accepted.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func newHTTPUpstream(t testing.TB, tls bool) *server {
	t.Helper()
	u := &server{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "hello from upstream %s", r.URL.Path)
	}))
	srv.Listener = countingListener{srv.Listener, &u.accepted}
	if tls {
		srv.StartTLS()
		u.caFile = filepath.Join(t.TempDir(), "ca.pem")
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := os.WriteFile(u.caFile, pemBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := x509.ParseCertificate(srv.Certificate().Raw); err != nil {
			t.Fatal(err)
		}
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	u.addr = srv.Listener.Addr().String()
	_, u.port, _ = net.SplitHostPort(u.addr)
	return u
}

func newEchoUpstream(t testing.TB) *server {
	t.Helper()
	return newTCPUpstream(t, func(c net.Conn) { io.Copy(c, c) })
}

// newSinkUpstream reads everything it is sent, then answers one byte.
func newSinkUpstream(t testing.TB) *server {
	t.Helper()
	return newTCPUpstream(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		c.Write([]byte{1})
	})
}

// newTCPUpstream serves each connection with serve, then closes it.
func newTCPUpstream(t testing.TB, serve func(net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &server{addr: ln.Addr().String()}
	_, u.port, _ = net.SplitHostPort(u.addr)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return u
}

// allow is a policy allowing hosts on any port, and no other.
func allow(hosts ...string) *v1alpha1.EgressSpec {
	return &v1alpha1.EgressSpec{Default: v1alpha1.EgressDeny, Rules: []v1alpha1.EgressRule{{Action: v1alpha1.EgressAllow, Hosts: hosts}}}
}

var loopback4 = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// waitEvent waits for an event about kind/name with reason, and returns it.
func (h *harness) waitEvent(kind, name, reason string) v1alpha1.Event {
	h.t.Helper()
	var found v1alpha1.Event
	deadline := time.After(testutil.Deadline)
	for {
		evs, changed := h.events.List(reconcile.Key{Kind: kind, Name: name}, 0)
		for _, e := range evs {
			if e.Reason == reason {
				found = e
			}
		}
		if found.Reason != "" {
			return found
		}
		select {
		case <-changed:
		case <-deadline:
			h.t.Fatalf("no %s event about %s %s", reason, kind, name)
		}
	}
}
