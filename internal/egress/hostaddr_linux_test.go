package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/egress/hostaddr"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// nsDialer dials one address, from the test's own network namespace;
// the proxy asking for any other fails the test.
type nsDialer struct {
	t     testing.TB
	ns    *testutil.NetNamespace
	only  netip.Addr
	dials atomic.Int64
}

func (d *nsDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || ap.Addr() != d.only {
		d.t.Errorf("the proxy dialed %s, not %s", address, d.only)
		return nil, errors.New("test: only the namespace's address is dialed")
	}
	d.dials.Add(1)
	return d.ns.DialContext(ctx, network, address)
}

func TestHostAddressesAreRefusedUnlessNamed(t *testing.T) {
	needCurl(t)
	ns := testutil.NewNetNamespace(t)
	// Outside every private range: only being the host's own closes it.
	own := netip.MustParsePrefix("198.51.100.7/32")
	ns.AddInterface(t, "mt0", own)
	addrs, err := hostaddr.NewAt(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	ln := ns.Listen(t, "tcp", net.JoinHostPort(own.Addr().String(), "0"))
	var accepted atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the host's own address")
	})}
	go srv.Serve(countingListener{ln, &accepted})
	t.Cleanup(func() { srv.Close() })

	url := "http://" + ln.Addr().String() + "/"

	dialer := &nsDialer{t: t, ns: ns, only: own.Addr()}
	h := newHarness(t, func(o *Options) { o.HostAddresses = addrs; o.Dialer = dialer })
	h.policies.declare("coder", &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow})
	a := h.launch("coder", "webapp")

	for _, args := range [][]string{
		{"-x", h.proxyURL(), url},
		{"-x", h.proxyURL(), "-p", "-w", "%{http_connect}", url}, // CONNECT
		{"-x", "socks5://" + h.tcp, url},
	} {
		code, _ := h.curl(a.dir, args...)
		if code != "403" && code != "000" {
			t.Errorf("curl %v = %q, want a refusal", args, code)
		}
		rec := h.audit.next(t)
		wantRecord(t, rec, a, rec.Protocol, own.Addr().String(), VerdictDeny, "host_address")
	}
	if n := accepted.Load(); n != 0 || dialer.dials.Load() != 0 {
		t.Fatalf("the upstream accepted %d connections, the proxy dialed %d: the host's own address must see nothing", n, dialer.dials.Load())
	}

	// A rule that names it reaches it.
	h.policies.declare("coder", &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow, Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, CIDRs: []string{own.String()}},
	}})
	code, err := h.curl(a.dir, "-x", h.proxyURL(), url)
	if err != nil || code != "200" {
		t.Fatalf("curl with a rule naming %s = %q, %v; want 200", own, code, err)
	}
	wantRecord(t, h.audit.next(t), a, ProtocolHTTP, own.Addr().String(), VerdictAllow, "rule")
	if accepted.Load() != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", accepted.Load())
	}
}
