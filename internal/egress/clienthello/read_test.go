package clienthello

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// captureConn keeps what a TLS client writes and ends its reads, so that
// a handshake writes its ClientHello and fails.
type captureConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *captureConn) Write(b []byte) (int, error)      { return c.buf.Write(b) }
func (c *captureConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }

// clientHello is the ClientHello crypto/tls sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	c := &captureConn{}
	tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}).Handshake()
	if c.buf.Len() == 0 {
		t.Fatal("the TLS client wrote nothing")
	}
	return c.buf.Bytes()
}

// fragment splits the handshake records of hello into records of at most
// size bytes each.
func fragment(hello []byte, size int) []byte {
	var msg []byte
	for b := hello; len(b) >= recordHeaderLen; {
		n := int(binary.BigEndian.Uint16(b[3:5]))
		msg = append(msg, b[recordHeaderLen:recordHeaderLen+n]...)
		b = b[recordHeaderLen+n:]
	}
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, recordTypeHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// build makes a one-record ClientHello with the given extensions.
func build(exts ...[]byte) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = append(body, 0, 2, 0x13, 0x01)    // one suite
	body = append(body, 1, 0)                // null compression
	var e []byte
	for _, x := range exts {
		e = append(e, x...)
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(e)))
	body = append(body, e...)
	msg := []byte{handshakeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	msg = append(msg, body...)
	rec := []byte{recordTypeHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}
	return append(rec, msg...)
}

// sni is a server_name extension holding names, each a host_name entry.
func sni(names ...string) []byte {
	var list []byte
	for _, n := range names {
		list = append(list, nameTypeHost)
		list = binary.BigEndian.AppendUint16(list, uint16(len(n)))
		list = append(list, n...)
	}
	data := binary.BigEndian.AppendUint16(nil, uint16(len(list)))
	data = append(data, list...)
	ext := binary.BigEndian.AppendUint16(nil, extServerName)
	ext = binary.BigEndian.AppendUint16(ext, uint16(len(data)))
	return append(ext, data...)
}

func TestRead(t *testing.T) {
	hello := clientHello(t, "example.com")
	tests := []struct {
		name    string
		in      []byte
		max     int
		want    Hello
		wantErr error
		// read is how many bytes Read must have taken; -1 for all.
		read int
	}{
		{"crypto_tls", hello, 32 << 10, Hello{ServerName: "example.com", HasServerName: true}, nil, -1},
		{"crypto_tls_no_sni", clientHello(t, ""), 32 << 10, Hello{}, nil, -1},
		{"fragmented_in_small_records", fragment(hello, 7), 32 << 10, Hello{ServerName: "example.com", HasServerName: true}, nil, -1},
		{"case_kept", build(sni("GitHub.COM.")), 4096, Hello{ServerName: "GitHub.COM.", HasServerName: true}, nil, -1},
		{"no_extensions", build(), 4096, Hello{}, nil, -1},
		{"empty_name_list", build(sni()), 4096, Hello{HasServerName: true}, nil, -1},
		{"http", []byte("GET / HTTP/1.1\r\n"), 4096, Hello{}, ErrNotTLS, 1},
		{"ssh", []byte("SSH-2.0-OpenSSH\r\n"), 4096, Hello{}, ErrNotTLS, 1},
		{"handshake_byte_then_other", []byte{22, 'x', 0, 0, 5}, 4096, Hello{}, ErrNotTLS, 5},
		{"too_large", hello, 100, Hello{}, ErrTooLarge, 5},
		{"two_server_names", build(sni("a.test"), sni("b.test")), 4096, Hello{}, ErrMalformed, -1},
		{"two_host_names", build(sni("a.test", "b.test")), 4096, Hello{}, ErrMalformed, -1},
		{"empty_host_name", build(sni("")), 4096, Hello{}, ErrMalformed, -1},
		{"not_a_client_hello", append([]byte{22, 3, 1, 0, 4}, 2, 0, 0, 0), 4096, Hello{}, ErrMalformed, -1},
		{"empty_record", []byte{22, 3, 1, 0, 0}, 4096, Hello{}, ErrMalformed, 5},
		{"alert_inside", append(fragment(hello, 50)[:55], 21, 3, 1, 0, 2, 2, 40), 4096, Hello{}, ErrMalformed, 60},
		{"truncated", hello[:40], 4096, Hello{}, io.ErrUnexpectedEOF, 40},
		{"nothing", nil, 4096, Hello{}, io.EOF, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time: every read boundary is met.
			got, raw, err := Read(&oneByteReader{r: bytes.NewReader(tc.in)}, tc.max)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("Read = %+v, %v; want %+v, %v", got, err, tc.want, tc.wantErr)
			}
			want := len(tc.in)
			if tc.read >= 0 {
				want = tc.read
			}
			if !bytes.Equal(raw, tc.in[:want]) {
				t.Errorf("Read returned %d bytes, want the %d it read", len(raw), want)
			}
		})
	}
}

// oneByteReader reads one byte at a time.
type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return o.r.Read(b[:1])
}

func TestReadLeavesWhatFollows(t *testing.T) {
	hello := clientHello(t, "example.com")
	r := bytes.NewReader(append(append([]byte{}, hello...), 20, 3, 3, 0, 1, 1))
	_, raw, err := Read(r, 32<<10)
	if err != nil || !bytes.Equal(raw, hello) {
		t.Fatalf("Read = %d bytes, %v; want the ClientHello's %d", len(raw), err, len(hello))
	}
	if r.Len() != 6 {
		t.Errorf("%d bytes left after the ClientHello, want the 6 of the record after it", r.Len())
	}
}

func FuzzRead(f *testing.F) {
	f.Add(clientHello(f, "example.com"), 32<<10)
	f.Add(fragment(clientHello(f, "a.example.com"), 3), 32<<10)
	f.Add(build(sni("a.test", "b.test")), 4096)
	f.Add([]byte("GET / HTTP/1.1\r\n"), 100)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		max = max%(64<<10) + 1
		if max < 0 {
			max = -max
		}
		h, raw, err := Read(bytes.NewReader(in), max)
		if !bytes.HasPrefix(in, raw) {
			t.Fatalf("Read returned %d bytes that are not what it read", len(raw))
		}
		if len(raw) > max {
			t.Fatalf("Read took %d bytes past its limit of %d", len(raw), max)
		}
		if err != nil {
			if h != (Hello{}) {
				t.Fatalf("Read = %+v with error %v", h, err)
			}
			return
		}
		if h.ServerName != "" && !h.HasServerName {
			t.Fatalf("a name without the extension: %+v", h)
		}
		// What was read is read again the same, in any fragmentation.
		h2, raw2, err := Read(&oneByteReader{r: bytes.NewReader(raw)}, max)
		if err != nil || h2 != h || !bytes.Equal(raw2, raw) {
			t.Fatalf("read again = %+v, %v; want %+v", h2, err, h)
		}
	})
}

func BenchmarkRead(b *testing.B) {
	hello := clientHello(b, "example.com")
	b.SetBytes(int64(len(hello)))
	r := bytes.NewReader(hello)
	for b.Loop() {
		r.Reset(hello)
		if _, _, err := Read(r, 32<<10); err != nil {
			b.Fatal(err)
		}
	}
}
