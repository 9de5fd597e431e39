package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// shortSocket returns a socket path that fits the kernel's limit.
func shortSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mconn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

func TestRunConnCarriesARequestAndItsAnswer(t *testing.T) {
	socket := shortSocket(t)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// More than a socket buffer, so that writes block and resume.
	request := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		got := make([]byte, len(request))
		if _, err := io.ReadFull(c, got); err != nil {
			served <- err
			return
		}
		if !bytes.Equal(got, request) {
			served <- errors.New("the request arrived changed")
			return
		}
		_, err = c.Write([]byte("answer"))
		served <- err
	}()
	c, err := dialRun(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Write(request); n != len(request) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(request))
	}
	answer, err := io.ReadAll(c)
	if err != nil || string(answer) != "answer" {
		t.Errorf("read %q, %v; want the answer and EOF", answer, err)
	}
	if err := <-served; err != nil {
		t.Error(err)
	}
}

// Shutdown ends a Read blocked in another goroutine, and the peer sees
// the connection end: that is how an interrupt reaches marshald.
func TestRunConnShutdownEndsABlockedRead(t *testing.T) {
	socket := shortSocket(t)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := dialRun(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		read <- err
	}()
	// Whether the Read has blocked yet or not, it must end with EOF.
	peerRead := make(chan error, 1)
	go func() {
		_, err := peer.Read(make([]byte, 1))
		peerRead <- err
	}()
	c.Shutdown()
	for name, ch := range map[string]chan error{"marshalctl": read, "marshald": peerRead} {
		select {
		case err := <-ch:
			if !errors.Is(err, io.EOF) {
				t.Errorf("%s's read after Shutdown = %v, want EOF", name, err)
			}
		case <-time.After(testutil.Deadline):
			t.Fatalf("%s's read still blocked %v after Shutdown", name, testutil.Deadline)
		}
	}
	c.Close()
	c.Shutdown() // after Close, a no-op that touches no descriptor
}

func TestDialRunFails(t *testing.T) {
	notASocket := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notASocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	closed := shortSocket(t)
	ln, err := net.Listen("unix", closed)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	tests := []struct {
		name   string
		socket string
		want   error
	}{
		{"missing", filepath.Join(t.TempDir(), "none.sock"), fs.ErrNotExist},
		{"not_a_socket", notASocket, syscall.ECONNREFUSED},
		{"nobody_listening", closed, syscall.ECONNREFUSED},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dialRun(tc.socket)
			if !errors.Is(err, tc.want) {
				if c != nil {
					c.Close()
				}
				t.Errorf("dialRun(%q) = %v, want %v", tc.socket, err, tc.want)
			}
		})
	}
}

// A listener whose backlog is full refuses at once: a blocking connect
// would hold marshalctl where an interrupt cannot reach it.
func TestDialRunRefusedWhenTheBacklogIsFull(t *testing.T) {
	socket := shortSocket(t)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: socket}); err != nil {
		t.Fatal(err)
	}
	// Never accepted: the second connection finds the queue full.
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var conns []runConnection
	go func() {
		for range 8 {
			c, err := dialRun(socket)
			if err != nil {
				done <- err
				return
			}
			conns = append(conns, c)
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EAGAIN) {
			t.Errorf("dialing a full backlog: %v, want EAGAIN", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatalf("dialing a full backlog still blocked after %v", testutil.Deadline)
	}
	for _, c := range conns {
		c.Close()
	}
}
