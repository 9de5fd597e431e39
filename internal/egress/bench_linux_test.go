package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/peer"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

// latencies collects one duration per iteration and reports their
// percentiles in microseconds.
type latencies []time.Duration

func (l latencies) report(b *testing.B, name string) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.5), name+"-p50-µs")
	b.ReportMetric(at(0.99), name+"-p99-µs")
}

func (l latencies) p50() time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[len(s)/2]
}

// holder is a child process in a group that holds connections to the
// proxy (or tunnels through it) until it is told to stop.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startHolder starts the test binary in dir in client mode with args and
// waits for its "ready".
func startHolder(b *testing.B, dir, mode string, args ...string) *holder {
	b.Helper()
	f, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), clientEnv+"="+mode)
	cmd.SysProcAttr = cgroupAttr(int(f.Fd()))
	cmd.Stderr = os.Stderr
	h := &holder{cmd: cmd}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	h.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		h.stdin.Close()
		cmd.Wait()
	})
	line, err := h.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		b.Fatalf("client %s: %q, %v", mode, line, err)
	}
	return h
}

// acceptN accepts n connections on ln.
func acceptN(b *testing.B, ln net.Listener, n int) []net.Conn {
	b.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return conns
}

// BenchmarkPeerIdentity measures identifying the peer of one accepted
// connection from an agent: on TCP loopback (the kernel's socket
// diagnostics and the group's id remembered, or, for the first
// connection from a group, looked for), and on the unix socket
// (SO_PEERCRED, a pidfd and the group id it gives, its path remembered).
// Target: p50 ≤ 20 µs.
func BenchmarkPeerIdentity(b *testing.B) {
	h := newHarness(b, nil)
	a := h.launch("coder", "webapp")
	tree, launches := h.tree, h.launches
	const conns = 64
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer tcp.Close()
	sock := filepath.Join(testutil.ShortDir(b), "id.sock")
	unix, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close()
	startHolder(b, a.dir, "hold", "tcp", tcp.Addr().String(), strconv.Itoa(conns))
	tcpConns := acceptN(b, tcp, conns)
	startHolder(b, a.dir, "hold", "unix", sock, strconv.Itoa(conns))
	unixConns := acceptN(b, unix, conns)

	run := func(b *testing.B, cs []net.Conn, fresh bool) {
		self, err := identity.SelfNetNS()
		if err != nil {
			b.Fatal(err)
		}
		x := peer.NewIdentifier(tree.Mounts.V2, launches, self)
		defer x.Close()
		var lat latencies
		i := 0
		for b.Loop() {
			if fresh {
				x.ForgetGroups()
			}
			start := time.Now()
			_, who, err := x.Identify(cs[i%len(cs)])
			lat = append(lat, time.Since(start))
			if err != nil || who.ID != a.ID {
				b.Fatalf("identified %+v, %v; want the launch", who, err)
			}
			i++
		}
		lat.report(b, "identify")
	}
	b.Run("tcp", func(b *testing.B) { run(b, tcpConns, false) })
	b.Run("tcp_first_from_its_group", func(b *testing.B) { run(b, tcpConns, true) })
	b.Run("unix", func(b *testing.B) { run(b, unixConns, false) })
}

// BenchmarkDecision measures deciding a request of an agent on a profile
// of 16 rules read from a real desired store, as marshald does at every
// decision: a destination given as an address, and one by name (resolved
// from a table, so that the figure is the proxy's and not a resolver's).
// Target: ≤ 50 µs.
func BenchmarkDecision(b *testing.B) {
	desired := reconcile.NewDesiredStore()
	prof := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	prof.Metadata.Name = "coder"
	spec := &v1alpha1.EgressSpec{Default: v1alpha1.EgressDeny}
	for i := range 15 {
		spec.Rules = append(spec.Rules, v1alpha1.EgressRule{Action: v1alpha1.EgressAllow,
			Hosts: []string{fmt.Sprintf("host%d.example.org", i), fmt.Sprintf("*.svc%d.example.org", i)}, Ports: []int32{443, 22}})
	}
	spec.Rules = append(spec.Rules, v1alpha1.EgressRule{Action: v1alpha1.EgressAllow, Hosts: []string{"github.com"},
		CIDRs: []string{"140.82.112.0/20"}, Ports: []int32{443}})
	prof.Spec.Egress = spec
	prof.Default()
	if _, err := desired.Set(prof); err != nil {
		b.Fatal(err)
	}
	resolver := mapResolver{"github.com": {netip.MustParseAddr("140.82.112.3"), netip.MustParseAddr("140.82.112.4")}}
	p, err := New(Options{Launches: &launchTable{m: map[string]Launch{}}, Policies: StorePolicies{Desired: desired},
		CgroupMount: "/", Resolver: resolver})
	if err != nil {
		b.Fatal(err)
	}
	c := &conn{peer: &peer.Peer{Transport: TransportTCP}, who: peer.Who{Launch: Launch{Profile: "coder"}, Scope: "s"}}
	for _, host := range []string{"140.82.112.3", "github.com"} {
		b.Run(map[bool]string{true: "address", false: "name"}[host[0] == '1'], func(b *testing.B) {
			t, err := newTarget(ProtocolConnect, host, 443)
			if err != nil {
				b.Fatal(err)
			}
			var lat latencies
			for b.Loop() {
				start := time.Now()
				v, addrs := p.decide(context.Background(), c.who, t)
				lat = append(lat, time.Since(start))
				if v.verdict != VerdictAllow || len(addrs) == 0 {
					b.Fatalf("decided %+v", v)
				}
			}
			lat.report(b, "decide")
		})
	}
}

// proxyBench is a proxy on loopback, and the bench process moved into a
// launched scope so that its own connections are an agent's.
type proxyBench struct {
	h    *harness
	a    *agent
	echo *server
}

func newProxyBench(b *testing.B, tweak func(*Options)) *proxyBench {
	b.Helper()
	// The real audit log, as marshald writes it.
	log, err := OpenLog(b.TempDir(), LogOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { log.Close() })
	h := newHarness(b, func(o *Options) {
		o.Audit = log
		if tweak != nil {
			tweak(o)
		}
	})
	pb := &proxyBench{h: h, a: h.launch("coder", "webapp"), echo: newEchoUpstream(b)}
	h.policies.declare("coder", &v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, CIDRs: []string{"127.0.0.1/32"}}}})
	return pb
}

// enterScope moves the bench process into the agent's scope until b
// ends, so that the sockets it makes are the agent's.
func (pb *proxyBench) enterScope(b *testing.B) {
	b.Helper()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	var back string
	for line := range strings.Lines(string(own)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			back = p
		}
	}
	if err := os.WriteFile(pb.a.dir+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := os.WriteFile(pb.h.tree.Mounts.V2+back+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			b.Errorf("moving back to %s: %v", back, err)
		}
	})
}

// connect opens a tunnel to addr through the proxy.
func (pb *proxyBench) connect(b *testing.B, addr string) net.Conn {
	c, err := net.Dial("tcp", pb.h.tcp)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	var resp [39]byte // "HTTP/1.1 200 Connection established\r\n\r\n"
	if _, err := io.ReadFull(c, resp[:]); err != nil || !strings.HasPrefix(string(resp[:]), "HTTP/1.1 200") {
		b.Fatalf("CONNECT %s: %q %v", addr, resp, err)
	}
	return c
}

// BenchmarkConnectSetup measures what the proxy adds to opening a
// connection: a direct loopback connect beside a CONNECT through the
// proxy to the same server, answered 200, each timed by a small client
// process in an agent's scope, as a tool such as curl would be.
// Target: added p50 ≤ 0.3 ms.
func BenchmarkConnectSetup(b *testing.B) {
	pb := newProxyBench(b, nil)
	f, err := os.Open(pb.a.dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	relay := newConnectRelay(b)
	b.ResetTimer()
	cmd := exec.Command(os.Args[0], pb.h.tcp, pb.echo.addr, strconv.Itoa(b.N), relay)
	cmd.Env = append(os.Environ(), clientEnv+"=connect-bench")
	cmd.SysProcAttr = cgroupAttr(int(f.Fd()))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	var direct, proxied, relayed latencies
	for line := range strings.Lines(string(out)) {
		var d, c, r int64
		if n, _ := fmt.Sscanf(line, "direct %d connect %d relay %d", &d, &c, &r); n == 3 {
			direct, proxied, relayed = append(direct, time.Duration(d)), append(proxied, time.Duration(c)), append(relayed, time.Duration(r))
		}
	}
	if len(direct) != b.N {
		b.Fatalf("%d rounds timed, want %d:\n%s", len(direct), b.N, out)
	}
	direct.report(b, "direct")
	proxied.report(b, "connect")
	relayed.report(b, "relay")
	b.ReportMetric(float64((proxied.p50()-direct.p50()).Nanoseconds())/1e3, "added-p50-µs")
	b.ReportMetric(float64((proxied.p50()-relayed.p50()).Nanoseconds())/1e3, "over-relay-p50-µs")
}

// newConnectRelay is the least a CONNECT proxy can do: read the request
// head, dial the target, answer 200 and close. It returns its address.
func newConnectRelay(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				up, err := net.Dial("tcp", req.Host)
				if err != nil {
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				io.Copy(io.Discard, c)
			})
		}
	})
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// BenchmarkTunnelThroughput sends 64 MiB to a loopback sink three ways,
// in turn: directly, through a bare relay (io.Copy both ways between two
// sockets, as the smallest Go proxy would: a second TCP connection on the
// same cores and nothing else), and through a CONNECT tunnel. It reports
// the tunnel's throughput as a share of each. The target is ≥ 80 % of the
// direct copy; the share of the relay says how much of what is missing
// any relay pays for its second connection.
func BenchmarkTunnelThroughput(b *testing.B) {
	pb := newProxyBench(b, nil)
	pb.enterScope(b)
	sink := newSinkUpstream(b)
	relay := newRelay(b, sink.addr)
	const size = 64 << 20
	buf := make([]byte, 1<<20)
	send := func(c net.Conn) time.Duration {
		start := time.Now()
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		c.(interface{ CloseWrite() error }).CloseWrite()
		var ack [1]byte
		if _, err := io.ReadFull(c, ack[:]); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		c.Close()
		return d
	}
	dial := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	var direct, relayed, tunnel time.Duration
	b.SetBytes(3 * size)
	for b.Loop() {
		direct += send(dial(sink.addr))
		relayed += send(dial(relay))
		tunnel += send(pb.connect(b, sink.addr))
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(direct), "direct-MiB/s")
	b.ReportMetric(mbps(relayed), "relay-MiB/s")
	b.ReportMetric(mbps(tunnel), "tunnel-MiB/s")
	b.ReportMetric(100*relayed.Seconds()/tunnel.Seconds(), "tunnel/relay-%")
	b.ReportMetric(100*direct.Seconds()/tunnel.Seconds(), "tunnel/direct-%")
}

// newRelay listens on loopback and copies each connection to and from a
// new connection to target, as io.Copy does it (spliced), and nothing
// more. It returns its address.
func newRelay(b *testing.B, target string) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				var half sync.WaitGroup
				half.Go(func() {
					io.Copy(up, c)
					up.(*net.TCPConn).CloseWrite()
				})
				io.Copy(c, up)
				half.Wait()
			})
		}
	})
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// BenchmarkIdleTunnelsRSS opens 1,000 CONNECT tunnels from a child
// process in an agent's scope to an echo server of its own, and reports
// the resident memory the proxy, alone in the bench process, gained.
// Target: ≤ 50 MB.
func BenchmarkIdleTunnelsRSS(b *testing.B) {
	const tunnels = 1000
	pb := newProxyBench(b, func(o *Options) { o.MaxConnsPerPeer = tunnels })
	before := rss(b)
	startHolder(b, pb.a.dir, "tunnels", "tcp", pb.h.tcp, strconv.Itoa(tunnels))
	after := rss(b)
	// One measurement, however many iterations the framework asks for.
	for b.Loop() {
	}
	b.ReportMetric(float64(after-before)/(1<<20), "added-MiB")
	b.ReportMetric(float64(after-before)/tunnels/1024, "KiB/tunnel")
}

// rss returns this process's resident memory, after a collection.
func rss(b *testing.B) int64 {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
