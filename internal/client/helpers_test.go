package client

import (
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// listen returns a unix listener in t.TempDir(), closed when t ends.
func listen(t testing.TB) (*net.UnixListener, string) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, socket
}

// serve runs a net/http server with h on a unix socket in t.TempDir()
// until t ends, and returns the socket.
func serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, socket := listen(t)
	srv := &http.Server{Handler: h}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve = %v, want ErrServerClosed", err)
		}
	})
	return socket
}

// raw answers with answer as is, bytes net/http would not write, then
// closes the connection.
func raw(answer string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		buf.WriteString(answer)
		buf.Flush()
	})
}

// await waits for ch, failing t after testutil.Deadline.
func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testutil.Deadline):
		t.Fatalf("%s: nothing after %v", what, testutil.Deadline)
	}
	panic("unreachable")
}
