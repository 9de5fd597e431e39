package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// get sends a GET of path on a connection of its own and returns the
// answer with its whole body, or the first error.
func get(t *testing.T, socket, path string) (*Response, []byte, error) {
	t.Helper()
	c, err := Dial(t.Context(), socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(appendRequest(nil, methodGet, path, nil)); err != nil {
		return nil, nil, err
	}
	resp, err := c.ReadResponse()
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// What a net/http server writes, with a length or chunked, is read as it
// was written.
func TestReadsWhatNetHTTPWrites(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef\n"), 1<<16)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"version":"v"}`))
	})
	mux.HandleFunc("/flushed", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "line %d\n", i)
			http.NewResponseController(w).Flush()
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		for rest := big; len(rest) > 0; {
			n := min(len(rest), 10000)
			w.Write(rest[:n])
			rest = rest[n:]
		}
	})
	mux.HandleFunc("/big-with-length", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		w.Write(big)
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("/http10-to-eof", raw("HTTP/1.0 200 OK\r\n\r\nuntil the end"))
	mux.Handle("/chunked-with-extensions", raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5;name=value\r\nhello\r\n1 \r\n,\r\n6\r\n world\r\n0\r\n\r\n"))
	mux.HandleFunc("/not-found", http.NotFound)
	socket := serve(t, mux)

	tests := []struct {
		path   string
		status int
		length int64
		body   []byte
	}{
		{"/small", 200, 15, []byte(`{"version":"v"}`)},
		{"/flushed", 200, -1, []byte("line 0\nline 1\nline 2\n")},
		{"/big", 200, -1, big},
		{"/big-with-length", 200, int64(len(big)), big},
		{"/empty", 200, 0, []byte{}},
		{"/no-content", 204, 0, []byte{}},
		{"/http10-to-eof", 200, -1, []byte("until the end")},
		{"/chunked-with-extensions", 200, -1, []byte("hello, world")},
		{"/not-found", 404, 19, []byte("404 page not found\n")},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(strings.Trim(tc.path, "/"), "-", "_"), func(t *testing.T) {
			resp, body, err := get(t, socket, tc.path)
			if err != nil {
				t.Fatalf("GET %s: %v", tc.path, err)
			}
			if resp.StatusCode != tc.status || resp.ContentLength != tc.length || !bytes.Equal(body, tc.body) {
				t.Errorf("GET %s = %d, length %d, %d bytes %.40q; want %d, length %d, %d bytes %.40q",
					tc.path, resp.StatusCode, resp.ContentLength, len(body), body, tc.status, tc.length, len(tc.body), tc.body)
			}
			if want := fmt.Sprintf("%d %s", tc.status, http.StatusText(tc.status)); resp.Status != want {
				t.Errorf("GET %s: status %q, want %q", tc.path, resp.Status, want)
			}
		})
	}
}

// An answer that is not HTTP as this client reads it fails with a clear
// error, before or while its body is read.
func TestMalformedAnswers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/oversize-headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("x", maxHeaderBytes))
	})
	mux.HandleFunc("/many-headers", func(w http.ResponseWriter, r *http.Request) {
		for i := range maxHeaderBytes / 16 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), "0123456789")
		}
	})
	mux.HandleFunc("/length-cut-short", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("only this"))
	})
	answers := map[string]string{
		"/no-status-code":        "HTTP/1.1 OK\r\n\r\n",
		"/not-http":              "SSH-2.0-OpenSSH_9.6\r\n\r\n",
		"/http2":                 "HTTP/2.0 200 OK\r\n\r\n",
		"/informational":         "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
		"/header-without-colon":  "HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\nok",
		"/gzip":                  "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"/two-lengths":           "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
		"/negative-length":       "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok",
		"/empty":                 "",
		"/headers-cut-short":     "HTTP/1.1 200 OK\r\nContent-Type: applic",
		"/bad-chunk-size":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"/chunk-bare-lf":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n",
		"/chunk-without-crlf":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokk\r\n0\r\n\r\n",
		"/chunk-size-too-large":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
		"/trailer":               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n",
		"/chunked-cut-short":     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly this",
		"/chunked-without-end":   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
		"/chunk-extension-flood": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1;"+strings.Repeat("e", 1000)+"\r\nx\r\n", 20),
	}
	for path, answer := range answers {
		mux.Handle(path, raw(answer))
	}
	socket := serve(t, mux)

	tests := []struct {
		path string
		want error
		// inBody: the status line and headers are read, the body fails.
		inBody bool
	}{
		{path: "/oversize-headers", want: ErrBadResponse},
		{path: "/many-headers", want: ErrBadResponse},
		{path: "/no-status-code", want: ErrBadResponse},
		{path: "/not-http", want: ErrBadResponse},
		{path: "/http2", want: ErrBadResponse},
		{path: "/informational", want: ErrBadResponse},
		{path: "/header-without-colon", want: ErrBadResponse},
		{path: "/gzip", want: ErrBadResponse},
		{path: "/two-lengths", want: ErrBadResponse},
		{path: "/negative-length", want: ErrBadResponse},
		{path: "/empty", want: io.ErrUnexpectedEOF},
		{path: "/headers-cut-short", want: io.ErrUnexpectedEOF},
		{path: "/length-cut-short", want: io.ErrUnexpectedEOF, inBody: true},
		{path: "/bad-chunk-size", want: ErrBadResponse, inBody: true},
		{path: "/chunk-bare-lf", want: ErrBadResponse, inBody: true},
		{path: "/chunk-without-crlf", want: ErrBadResponse, inBody: true},
		{path: "/chunk-size-too-large", want: ErrBadResponse, inBody: true},
		{path: "/trailer", want: ErrBadResponse, inBody: true},
		{path: "/chunked-cut-short", want: io.ErrUnexpectedEOF, inBody: true},
		{path: "/chunked-without-end", want: io.ErrUnexpectedEOF, inBody: true},
		{path: "/chunk-extension-flood", want: ErrBadResponse, inBody: true},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(strings.Trim(tc.path, "/"), "-", "_"), func(t *testing.T) {
			resp, _, err := get(t, socket, tc.path)
			if !errors.Is(err, tc.want) || (resp != nil) != tc.inBody {
				t.Errorf("GET %s = answer read %v, %v; want answer read %v, %v", tc.path, resp != nil, err, tc.inBody, tc.want)
			}
		})
	}
}

// The request is one that net/http reads as sent: method, path, query,
// host, and a JSON body with its length; one per connection.
func TestRequestsAsNetHTTPReadsThem(t *testing.T) {
	type seen struct {
		method, uri, host, contentType string
		length                         int64
		close                          bool
		body                           string
	}
	requests := make(chan seen, 1)
	socket := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests <- seen{r.Method, r.RequestURI, r.Host, r.Header.Get("Content-Type"), r.ContentLength, r.Close, string(body)}
		w.Write([]byte("{}"))
	}))
	c := New(socket)
	tests := []struct {
		name string
		call func(ctx context.Context) error
		want seen
	}{
		{name: "get_with_query", call: func(ctx context.Context) error {
			_, err := c.Events(ctx, v1alpha1.ObjectReference{Kind: "Workspace", Name: "web app"}, 7)
			return err
		}, want: seen{method: "GET", uri: "/v1/events?after=7&kind=Workspace&name=web+app", host: "marshald", length: 0, close: true}},
		{name: "get_escaped_path", call: func(ctx context.Context) error {
			_, err := c.Get(ctx, "profiles", "a/b c")
			return err
		}, want: seen{method: "GET", uri: "/v1/objects/profiles/a%2Fb%20c", host: "marshald", length: 0, close: true}},
		{name: "post_with_body", call: func(ctx context.Context) error {
			_, err := c.Delete(ctx, localapi.DeleteRequest{Kind: "Profile", Name: "coder"})
			return err
		}, want: seen{method: "POST", uri: "/v1/delete", host: "marshald", contentType: "application/json",
			length: 33, close: true, body: `{"kind":"Profile","name":"coder"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := await(t, "the request", requests); got != tc.want {
				t.Errorf("the server read %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A watch's lines are handed over as the server flushes them, each
// before the next is written, and a stream the server ends is
// ErrStreamEnded.
func TestWatchReadsLinesAsFlushed(t *testing.T) {
	acked := make(chan struct{})
	socket := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			obj, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": fmt.Sprint("p", i)}})
			json.NewEncoder(w).Encode(localapi.WatchEvent{Type: localapi.Added, Object: obj})
			http.NewResponseController(w).Flush()
			select {
			case <-acked:
			case <-r.Context().Done():
				return
			}
		}
	}))
	var got []string
	// A reader that waited for more than was flushed would wait forever.
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
	defer cancel()
	err := New(socket).Watch(ctx, "profiles", func(ev localapi.WatchEvent) error {
		got = append(got, ev.Type+" "+string(ev.Object))
		// The server waits for this before it writes the next line.
		select {
		case acked <- struct{}{}:
		case <-ctx.Done():
		}
		return nil
	})
	want := []string{`ADDED {"metadata":{"name":"p0"}}`, `ADDED {"metadata":{"name":"p1"}}`, `ADDED {"metadata":{"name":"p2"}}`}
	if !errors.Is(err, ErrStreamEnded) || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Watch = %v after\n%s\nwant ErrStreamEnded after\n%s", err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Cancelling ends a request blocked on the server, before its answer
// or in the middle of a stream; the server sees the caller go away.
func TestCancelEndsABlockedRequest(t *testing.T) {
	started := make(chan string, 1)
	gone := make(chan string, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/info", func(w http.ResponseWriter, r *http.Request) {
		started <- "info"
		<-r.Context().Done()
		gone <- "info"
	})
	mux.HandleFunc("/v1/objects/profiles", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(localapi.WatchEvent{Type: localapi.Added, Object: json.RawMessage(`{}`)})
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		gone <- "watch"
	})
	socket := serve(t, mux)
	c := New(socket)
	tests := []struct {
		name string
		call func(ctx context.Context, cancel func()) error
	}{
		{name: "before_the_answer", call: func(ctx context.Context, cancel func()) error {
			go func() {
				<-started
				cancel()
			}()
			_, err := c.Info(ctx)
			return err
		}},
		{name: "in_a_stream", call: func(ctx context.Context, cancel func()) error {
			return c.Watch(ctx, "profiles", func(localapi.WatchEvent) error {
				cancel()
				return nil
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tc.call(ctx, cancel) }()
			if err := await(t, "the cancelled request", done); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled request = %v, want context.Canceled", err)
			}
			await(t, "the server seeing the caller go away", gone)
		})
	}
}

// marshald may refuse a caller and close before it reads the whole
// request; the refusal is what the caller gets, not a broken pipe. A
// net/http server reads on before it closes, so a listener of its own
// shows it.
func TestAnswerBeforeTheRequestIsRead(t *testing.T) {
	ln, socket := listen(t)
	refusal := `{"code":"FORBIDDEN","message":"uid 1000 is not admitted"}`
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 16)); err != nil {
			served <- err
			return
		}
		_, err = fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(refusal), refusal)
		served <- err
	}()
	// Far more than the socket buffers hold.
	big := localapi.ApplyRequest{Files: []localapi.ApplyFile{{Name: "big.yaml", Data: bytes.Repeat([]byte("#"), 8<<20)}}}
	_, err := New(socket).Apply(t.Context(), big)
	var apiErr *localapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeForbidden {
		t.Errorf("Apply refused before it was read = %v, want FORBIDDEN", err)
	}
	if err := await(t, "the server", served); err != nil {
		t.Error(err)
	}
}
