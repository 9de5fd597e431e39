package client

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkRequest is one request and its whole answer over a unix
// socket, from a net/http server: a small answer with a length and a
// large chunked one, read by this client and, for comparison, by
// net/http's, one connection per request both.
func BenchmarkRequest(b *testing.B) {
	large := bytes.Repeat([]byte(`{"type":"ADDED","object":{}}`+"\n"), 1<<15)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"version":"v"}`)) })
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for rest := large; len(rest) > 0; {
			n := min(len(rest), 8192)
			w.Write(rest[:n])
			rest = rest[n:]
		}
	})
	socket := serve(b, mux)
	ours := func(ctx context.Context, path string) (int64, error) {
		c, err := Dial(ctx, socket)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if _, err := c.Write(appendRequest(nil, methodGet, path, nil)); err != nil {
			return 0, err
		}
		resp, err := c.ReadResponse()
		if err != nil {
			return 0, err
		}
		return io.Copy(io.Discard, resp.Body)
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
	theirs := func(ctx context.Context, path string) (int64, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://marshald"+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return io.Copy(io.Discard, resp.Body)
	}
	for _, client := range []struct {
		name string
		get  func(context.Context, string) (int64, error)
	}{{"client", ours}, {"net_http", theirs}} {
		for _, path := range []string{"/small", "/chunked"} {
			b.Run(client.name+"_"+path[1:], func(b *testing.B) {
				var n int64
				for b.Loop() {
					var err error
					if n, err = client.get(b.Context(), path); err != nil {
						b.Fatal(err)
					}
				}
				if n > 64<<10 {
					b.SetBytes(n)
				}
			})
		}
	}
}
