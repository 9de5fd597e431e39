package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/marshal-dev/marshal/internal/egress/policy"
)

// maxSOCKSRequest is the most a SOCKS5 greeting and request can hold: 255
// methods, a 255-byte name.
const maxSOCKSRequest = 2 + 255 + 4 + 1 + 255 + 2

// FuzzReadSOCKS reads fuzzed bytes as a SOCKS5 greeting and request (the
// version byte already read): it never reads past what the protocol
// bounds, and what it accepts is a CONNECT to a port.
func FuzzReadSOCKS(f *testing.F) {
	f.Add([]byte("\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb"))
	f.Add([]byte("\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50"))
	f.Add([]byte("\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50"))
	f.Add([]byte("\x02\x02\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50"))
	f.Add([]byte("\x01\x02"))
	f.Add([]byte("\x01\x00\x05\x01\x00\x03\x00\x00\x50"))
	f.Add([]byte("\x01\x00\x04\x01\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countingBytes{r: bytes.NewReader(data)}
		req, err := readSOCKS(r, io.Discard)
		if r.n > maxSOCKSRequest {
			t.Fatalf("read %d bytes, more than a request can hold", r.n)
		}
		if err != nil {
			var se *socksError
			if !errors.As(err, &se) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if req.cmd != socksConnect || req.port == 0 || req.host == "" || len(req.host) > 255 {
			t.Fatalf("accepted %+v", req)
		}
		if _, err := newTarget(ProtocolSOCKS5, req.host, req.port); err != nil && !errors.Is(err, policy.ErrBadHost) {
			t.Fatalf("target of %+v: %v", req, err)
		}
	})
}

type countingBytes struct {
	r io.Reader
	n int
}

func (c *countingBytes) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}

// FuzzHTTPTarget reads fuzzed bytes as an HTTP request head, as the
// proxy's http.Server does, and takes its destination: what it accepts
// is a host the policy can decide and a port from 1 to 65535.
func FuzzHTTPTarget(f *testing.F) {
	f.Add([]byte("CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n"))
	f.Add([]byte("GET http://example.com/x?y HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte("GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"))
	f.Add([]byte("GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte("CONNECT 127.0.0.1:0 HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("CONNECT a..b:80 HTTP/1.1\r\n\r\n"))
	f.Add([]byte("POST http://EXAMPLE.com.:99999/ HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return
		}
		tg, err := httpTarget(req)
		if err != nil {
			return
		}
		if tg.port == 0 || tg.host == "" || tg.protocol != ProtocolHTTP && tg.protocol != ProtocolConnect {
			t.Fatalf("target %+v of %q", tg, data)
		}
		host, port, err := net.SplitHostPort(tg.hostPort())
		if err != nil || port != strconv.Itoa(int(tg.port)) {
			t.Fatalf("hostPort %q of %+v: %v", tg.hostPort(), tg, err)
		}
		name, addr, err := policy.ParseHost(host)
		if err != nil || name != tg.name || addr != tg.addr {
			t.Fatalf("target %+v does not read back: %q %v %v", tg, name, addr, err)
		}
	})
}
