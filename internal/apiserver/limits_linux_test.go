package apiserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// slowClient is a raw connection that sends a request head and then its
// body a byte a second, until the server closes the connection. The
// bytes are spaces, which JSON allows between any two tokens, so the body
// never ends or turns invalid: only a bound on the request ends it.
type slowClient struct {
	conn net.Conn
	done chan struct{}
}

func dialSlow(t *testing.T, socket, head string) *slowClient {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	c := &slowClient{conn: conn, done: make(chan struct{})}
	t.Cleanup(func() { conn.Close(); <-c.done })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, err := conn.Write([]byte{' '}); err != nil {
				return // the server closed the connection
			}
			select {
			case <-tick.C:
			case <-t.Context().Done():
				return
			}
		}
	}()
	return c
}

// answer reads what the server sends until it closes the connection,
// failing when it is still open after the test's deadline, and returns
// the status line ("" when it closed without answering).
func (c *slowClient) answer(t *testing.T) string {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(testutil.Deadline))
	data, err := io.ReadAll(c.conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %v; it sent %q", testutil.Deadline, data)
	}
	status, _, _ := strings.Cut(string(data), "\r\n")
	return status
}

// The whole request is bounded: a body declared longer than the limit
// is refused before any of it is read, and one that trickles in, declared
// or chunked (here as ffffffffffffffff bytes), loses its connection at
// the body deadline. All while a watch on the same server, which has no
// body, outlives the body deadline.
func TestSlowRequestsAreCut(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.Set(profile("a", 1000))
	d.UseConfigDir(t.TempDir())
	socket := apiservertest.Serve(t, d, apiserver.Options{BodyTimeout: 200 * time.Millisecond})
	watch := startWatch(t, func(ctx context.Context, fn func(localapi.WatchEvent) error) error {
		return client.New(socket).Watch(ctx, "profiles", fn)
	})
	if got := summary(t, watch.next(t)); got != "ADDED a cpu=1000" {
		t.Fatalf("watch event %q, want ADDED a", got)
	}

	post := func(path, headers string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: marshald\r\nContent-Type: application/json\r\n" + headers + "\r\n"
	}
	const conns = 30
	var huge, slow []*slowClient
	for range conns {
		huge = append(huge, dialSlow(t, socket, post(localapi.ApplyPath, "Content-Length: 1073741824\r\n")))
		slow = append(slow, dialSlow(t, socket, post(localapi.RunPath, "Content-Length: 1000\r\n")))
	}
	chunked := dialSlow(t, socket, post(localapi.ApplyPath, "Transfer-Encoding: chunked\r\n")+"ffffffffffffffff\r\n")

	var wg sync.WaitGroup
	check := func(c *slowClient, what, want string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := c.answer(t); got != want {
				t.Errorf("%s: answered %q, want %q, and closed", what, got, want)
			}
		}()
	}
	for i := range conns {
		check(huge[i], "a declared 1 GB body", "HTTP/1.1 413 Request Entity Too Large")
		check(slow[i], "a declared body sent a byte a second", "HTTP/1.1 408 Request Timeout")
	}
	check(chunked, "a chunk of ffffffffffffffff bytes sent a byte a second", "HTTP/1.1 408 Request Timeout")
	wg.Wait()

	// Every slow body was cut after the body deadline; the watch, older
	// than all of them, still delivers.
	d.Set(profile("b", 500))
	if got := summary(t, watch.next(t)); got != "ADDED b cpu=500" {
		t.Errorf("watch event %q after the body deadline, want ADDED b", got)
	}
}

// A head that never ends is cut at the head deadline, unanswered.
func TestEndlessHeadIsCut(t *testing.T) {
	socket := apiservertest.Serve(t, apiservertest.NewDaemon(), apiserver.Options{HeaderTimeout: 100 * time.Millisecond})
	c := dialSlow(t, socket, "GET "+localapi.InfoPath+" HTTP/1.1\r\nHost: marshald\r\nX-Slow: ")
	if got := c.answer(t); got != "" {
		t.Errorf("a head that never ends was answered %q, want the connection closed", got)
	}
}

// A refused body says why in the answer.
func TestSlowBodyAnswerSaysWhy(t *testing.T) {
	d := apiservertest.NewDaemon()
	socket := apiservertest.Serve(t, d, apiserver.Options{BodyTimeout: 100 * time.Millisecond, MaxBodyBytes: 4096})
	for _, tc := range []struct{ headers, want string }{
		{"Content-Length: 1073741824\r\n", `"request body of 1073741824 bytes is over the limit of 4096 bytes; send fewer files at once"`},
		{"Content-Length: 100\r\n", `"request body did not arrive whole within 100ms"`},
	} {
		c := dialSlow(t, socket, "POST "+localapi.ApplyPath+" HTTP/1.1\r\nHost: marshald\r\n"+tc.headers+"\r\n")
		c.conn.SetReadDeadline(time.Now().Add(testutil.Deadline))
		resp, err := http.ReadResponse(bufio.NewReader(c.conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.headers, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), tc.want) || !resp.Close {
			t.Errorf("%s: answered %s %v %s, want %s and Connection: close", strings.TrimSpace(tc.headers), resp.Status, resp.Header, body, tc.want)
		}
	}
}

// A uid holds at most MaxConnsPerPeer connections at once; one more is
// answered 429 UNAVAILABLE, while another uid is served as before.
func TestConnectionsPerPeerAreCapped(t *testing.T) {
	testutil.RequireRoot(t)
	const max = 3
	socket := filepath.Join(socketDir(t), "marshal.sock")
	ln, err := apiserver.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(socket, 0o666); err != nil {
		t.Fatal(err)
	}
	d := apiservertest.NewDaemon()
	d.SetInfo(apiservertestInfo)
	d.Set(profile("a", 1000))
	group := uint32(nogroup)
	apiservertest.ServeOn(t, apiserver.New(d, apiserver.Options{MaxConnsPerPeer: max, AllowGID: &group, BodyTimeout: 200 * time.Millisecond}), ln)

	for i := range max {
		w := startWatch(t, func(ctx context.Context, fn func(localapi.WatchEvent) error) error {
			return client.New(socket).Watch(ctx, "profiles", fn)
		})
		if got := summary(t, w.next(t)); got != "ADDED a cpu=1000" {
			t.Fatalf("watch %d: event %q, want ADDED a", i, got)
		}
	}
	status, _, body := call(t, socket, http.MethodGet, localapi.InfoPath, "")
	want := fmt.Sprintf(`{"code":"UNAVAILABLE","message":"uid 0 holds %d connections to marshald, the most it serves one user at once;`, max)
	if status != http.StatusTooManyRequests || !strings.HasPrefix(body, want) {
		t.Errorf("GET info beyond the cap = %d %s, want 429 %s…", status, body, want)
	}
	// A body sent to a connection beyond the cap is not waited for
	// either: the server reads what is left of a body before it closes.
	beyond := dialSlow(t, socket, "POST "+localapi.ApplyPath+" HTTP/1.1\r\nHost: marshald\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n")
	if got := beyond.answer(t); got != "HTTP/1.1 429 Too Many Requests" {
		t.Errorf("a chunked body sent a byte a second beyond the cap: answered %q, want 429, and closed", got)
	}
	if got := getAs(t, socket, localapi.InfoPath, nobody, nogroup); !strings.HasPrefix(got, `200 {"version":"test"`) {
		t.Errorf("GET info as another uid = %q, want 200: the cap is per uid", got)
	}
}
