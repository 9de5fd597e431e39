package bridge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// upstream is a unix socket server standing for the proxy: it answers
// each connection with what it read, uppercased, once the client
// half-closed, and reports each connection it accepted.
type upstream struct {
	path     string
	accepted chan struct{}
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{path: filepath.Join(t.TempDir(), "proxy.sock"), accepted: make(chan struct{}, 100)}
	ln, err := net.Listen("unix", u.path)
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
			u.accepted <- struct{}{}
			wg.Go(func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write([]byte(strings.ToUpper(string(b))))
			})
		}
	})
	return u
}

// startBridge runs Relay on a loopback listener until the test ends.
func startBridge(t *testing.T, socket string) (ln net.Listener, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Relay(ctx, ln, socket) }()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(testutil.Deadline):
			t.Error("Relay did not return after its context ended")
			return nil
		}
	})
	t.Cleanup(func() { stop() })
	return ln, stop
}

// A request that is all sent (the client half-closes) still gets its
// whole answer, and the client then reads the end.
func TestRelayCarriesBothWaysWithHalfClose(t *testing.T) {
	u := startUpstream(t)
	ln, _ := startBridge(t, u.path)
	for i := range 20 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		msg := strings.Repeat("request ", 1000*(i+1))
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != strings.ToUpper(msg) {
			t.Fatalf("answer %d: %d bytes, want %d, uppercased", i, len(got), len(msg))
		}
	}
}

// Connections are relayed at once, not one after another.
func TestRelayServesConnectionsConcurrently(t *testing.T) {
	u := startUpstream(t)
	ln, _ := startBridge(t, u.path)
	var conns []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range conns {
		select {
		case <-u.accepted:
		case <-time.After(testutil.Deadline):
			t.Fatal("the upstream did not see every open connection")
		}
	}
	for i, c := range conns {
		c.Write([]byte("x"))
		c.(*net.TCPConn).CloseWrite()
		if b, _ := io.ReadAll(c); string(b) != "X" {
			t.Errorf("connection %d answered %q", i, b)
		}
		c.Close()
	}
}

// With no proxy to reach, a client's connection is closed: nothing is
// carried anywhere else.
func TestRelayClosesWhenTheProxyCannotBeReached(t *testing.T) {
	ln, _ := startBridge(t, filepath.Join(t.TempDir(), "absent.sock"))
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testutil.Deadline))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read = %d, %v; want the connection closed", n, err)
	}
}

// Ending the context closes the listener and every open relay, and Relay
// returns nil once they stopped.
func TestRelayStopsEverythingWhenItsContextEnds(t *testing.T) {
	u := startUpstream(t)
	ln, stop := startBridge(t, u.path)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-u.accepted
	if err := stop(); err != nil {
		t.Fatalf("Relay = %v, want nil", err)
	}
	c.SetReadDeadline(time.Now().Add(testutil.Deadline))
	if _, err := bufio.NewReader(c).ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("an open relay after the stop: read %v, want it closed", err)
	}
	testutil.ListenerClosed(t, ln)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}
