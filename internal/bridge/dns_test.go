package bridge

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/marshal-dev/marshal/internal/egress"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// socksProxy is a unix socket server standing for the proxy: it answers
// a RESOLVE of an allowed name with answer(name) and refuses the rest,
// and carries an allowed CONNECT to an upper-casing echo, reporting
// each request as "cmd name:port".
type socksProxy struct {
	path     string
	allowed  map[string]bool
	answer   func(name string) netip.Addr
	requests chan string
}

func startSOCKSProxy(t *testing.T, allowed ...string) *socksProxy {
	t.Helper()
	p := &socksProxy{
		path: filepath.Join(testutil.ShortDir(t), "proxy.sock"), allowed: map[string]bool{},
		answer: egress.Placeholder, requests: make(chan string, 100),
	}
	for _, n := range allowed {
		p.allowed[n] = true
	}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				p.serve(c)
			})
		}
	})
	return p
}

func (p *socksProxy) serve(c net.Conn) {
	var b [262]byte
	if _, err := io.ReadFull(c, b[:3]); err != nil {
		return
	}
	c.Write([]byte{5, 0})
	if _, err := io.ReadFull(c, b[:5]); err != nil || b[3] != socksDomain {
		return
	}
	cmd, n := b[1], int(b[4])
	if _, err := io.ReadFull(c, b[:n+2]); err != nil {
		return
	}
	name, port := string(b[:n]), binary.BigEndian.Uint16(b[n:])
	p.requests <- fmt.Sprintf("%s %s:%d", map[byte]string{socksResolve: "resolve", socksConnect: "connect"}[cmd], name, port)
	if !p.allowed[name] {
		c.Write([]byte{5, socksNotAllowed, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	a := netip.IPv4Unspecified()
	if cmd == socksResolve {
		a = p.answer(name)
	}
	r := append([]byte{5, 0, 0, 1}, a.AsSlice()...)
	c.Write(append(r, 0, 0))
	if cmd == socksConnect {
		got, _ := io.ReadAll(c)
		c.Write([]byte(strings.ToUpper(string(got))))
	}
}

// startDNS runs ServeDNS on a loopback UDP socket until the test ends,
// with placeholders listened on port.
func startDNS(t *testing.T, socket string, port uint16) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeDNS(ctx, pc, DNSOptions{Socket: socket, Ports: []uint16{port}}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeDNS = %v", err)
			}
		case <-time.After(testutil.Deadline):
			t.Error("ServeDNS did not return after its context ended")
		}
	})
	return pc.LocalAddr().String()
}

// exchange sends query to the server and returns its response.
func exchange(t *testing.T, server string, query []byte) dnsmessage.Message {
	t.Helper()
	c, err := net.Dial("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testutil.Deadline))
	if _, err := c.Write(query); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1500)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(b[:n]); err != nil {
		t.Fatal(err)
	}
	return m
}

func query(t testing.TB, qs ...dnsmessage.Question) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 0x4d4d, RecursionDesired: true}, Questions: qs}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func question(name string, typ dnsmessage.Type) dnsmessage.Question {
	return dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}
}

// freePort is a TCP port free on loopback, for the placeholders.
func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func TestDNSAnswersAllowedNamesWithTheirPlaceholder(t *testing.T) {
	p := startSOCKSProxy(t, "api.allowed.test")
	port := freePort(t)
	server := startDNS(t, p.path, port)
	want := egress.Placeholder("api.allowed.test")

	tests := []struct {
		name    string
		q       []byte
		rcode   dnsmessage.RCode
		answers int
		asked   string // what the proxy was asked, "" for nothing
	}{
		{"allowed_a", query(t, question("API.allowed.test.", dnsmessage.TypeA)), dnsmessage.RCodeSuccess, 1, "resolve api.allowed.test:0"},
		{"allowed_aaaa_has_no_record", query(t, question("api.allowed.test.", dnsmessage.TypeAAAA)), dnsmessage.RCodeSuccess, 0, "resolve api.allowed.test:0"},
		{"denied", query(t, question("denied.test.", dnsmessage.TypeA)), dnsmessage.RCodeNameError, 0, "resolve denied.test:0"},
		{"other_type", query(t, question("api.allowed.test.", dnsmessage.TypeTXT)), dnsmessage.RCodeRefused, 0, ""},
		{"two_questions", query(t, question("api.allowed.test.", dnsmessage.TypeA), question("b.test.", dnsmessage.TypeA)), dnsmessage.RCodeRefused, 0, ""},
		{"no_question", query(t), dnsmessage.RCodeRefused, 0, ""},
		{"bad_name", query(t, question("a\\032b.test.", dnsmessage.TypeA)), dnsmessage.RCodeRefused, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := exchange(t, server, tc.q)
			if m.ID != 0x4d4d || !m.Response || m.RCode != tc.rcode || len(m.Answers) != tc.answers {
				t.Fatalf("response id %#x response %v rcode %v answers %d; want %v with %d", m.ID, m.Response, m.RCode, len(m.Answers), tc.rcode, tc.answers)
			}
			if tc.answers == 1 {
				a, ok := m.Answers[0].Body.(*dnsmessage.AResource)
				if !ok || netip.AddrFrom4(a.A) != want || m.Answers[0].Header.Name.String() != "API.allowed.test." {
					t.Errorf("answer %v, want %s for the name asked", m.Answers[0], want)
				}
			}
			select {
			case got := <-p.requests:
				if got != tc.asked {
					t.Errorf("the proxy was asked %q, want %q", got, tc.asked)
				}
			default:
				if tc.asked != "" {
					t.Errorf("the proxy was not asked %q", tc.asked)
				}
			}
		})
	}

	// A connection to the placeholder is carried to the proxy by name.
	c, err := net.Dial("tcp", netip.AddrPortFrom(want, port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	if got, _ := io.ReadAll(c); string(got) != "HELLO" {
		t.Errorf("through the placeholder: %q, want HELLO", got)
	}
	select {
	case got := <-p.requests:
		if want := fmt.Sprintf("connect api.allowed.test:%d", port); got != want {
			t.Errorf("the proxy was asked %q, want %q", got, want)
		}
	case <-time.After(testutil.Deadline):
		t.Error("the proxy was asked nothing for the placeholder's connection")
	}
	if placeholders != egress.PlaceholderPrefix {
		t.Errorf("the bridge listens in %s, the proxy answers in %s", placeholders, egress.PlaceholderPrefix)
	}
}

// Go's own resolver finds an allowed name's address, and not a denied
// one.
func TestDNSServesGoResolver(t *testing.T) {
	p := startSOCKSProxy(t, "ok.test")
	server := startDNS(t, p.path, freePort(t))
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
	defer cancel()
	addrs, err := r.LookupHost(ctx, "ok.test")
	if err != nil || len(addrs) != 1 || addrs[0] != egress.Placeholder("ok.test").String() {
		t.Errorf("LookupHost(ok.test) = %v, %v; want its placeholder", addrs, err)
	}
	if _, err := r.LookupHost(ctx, "no.test"); err == nil {
		t.Errorf("LookupHost(no.test) succeeded, want not found")
	}
}

// Two names the proxy answers with one address get two: the later one
// the next free.
func TestDNSGivesEachNameItsOwnPlaceholder(t *testing.T) {
	p := startSOCKSProxy(t, "a.test", "b.test")
	same := netip.MustParseAddr("127.77.0.9")
	p.answer = func(string) netip.Addr { return same }
	server := startDNS(t, p.path, freePort(t))
	var got []netip.Addr
	for _, name := range []string{"a.test.", "b.test.", "a.test."} {
		m := exchange(t, server, query(t, question(name, dnsmessage.TypeA)))
		if len(m.Answers) != 1 {
			t.Fatalf("%s: %d answers", name, len(m.Answers))
		}
		got = append(got, netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A))
	}
	if got[0] != same || got[1] != same.Next() || got[2] != same {
		t.Errorf("placeholders %v, want %s, %s, %s", got, same, same.Next(), same)
	}
}

// A proxy that answers an address outside the placeholders' range gets
// no listener there, and the client a failure.
func TestDNSRefusesAnAnswerOutsideThePlaceholders(t *testing.T) {
	p := startSOCKSProxy(t, "a.test")
	p.answer = func(string) netip.Addr { return netip.MustParseAddr("127.0.0.1") }
	server := startDNS(t, p.path, freePort(t))
	if m := exchange(t, server, query(t, question("a.test.", dnsmessage.TypeA))); m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 {
		t.Errorf("rcode %v, %d answers; want a server failure", m.RCode, len(m.Answers))
	}
}

func FuzzDNSAnswer(f *testing.F) {
	f.Add(query(f, question("a.test.", dnsmessage.TypeA)))
	f.Add(query(f, question("a.test.", dnsmessage.TypeMX), question("b.", dnsmessage.TypeA)))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c})
	s := &dnsServer{
		ctx:    f.Context(),
		opts:   DNSOptions{Socket: filepath.Join(f.TempDir(), "absent.sock")},
		relays: &relays{conns: map[net.Conn]struct{}{}},
		byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{},
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		resp := s.answer(t.Context(), q)
		if resp == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil || !m.Response || len(m.Answers) != 0 {
			t.Fatalf("response %v, %v: want a response without answers (no proxy)", m, err)
		}
	})
}
