package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestConnCarriesARequestAndItsAnswer(t *testing.T) {
	ln, socket := listen(t)
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
		_, err = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nanswer"))
		served <- err
	}()
	c, err := Dial(t.Context(), socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Write(request); n != len(request) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(request))
	}
	resp, err := c.ReadResponse()
	if err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ContentLength != 6 || string(answer) != "answer" || err != nil {
		t.Errorf("answer %d, length %d, %q, %v; want 200, 6, the answer and EOF", resp.StatusCode, resp.ContentLength, answer, err)
	}
	if err := await(t, "the server", served); err != nil {
		t.Error(err)
	}
}

// The end of the context ends a read blocked in ReadResponse, and the
// peer sees the connection end: that is how an interrupt reaches
// marshald.
func TestConnCancelEndsABlockedRead(t *testing.T) {
	ln, socket := listen(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := Dial(ctx, socket)
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
		_, err := c.ReadResponse()
		read <- err
	}()
	peerRead := make(chan error, 1)
	go func() {
		_, err := peer.Read(make([]byte, 1))
		peerRead <- err
	}()
	// Whether the read has blocked yet or not, it must end.
	cancel()
	if err := await(t, "ReadResponse after cancel", read); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadResponse after cancel = %v, want context.Canceled", err)
	}
	if err := await(t, "the peer's read after cancel", peerRead); !errors.Is(err, io.EOF) {
		t.Errorf("the peer's read after cancel = %v, want EOF", err)
	}
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\n")); !errors.Is(err, context.Canceled) {
		t.Errorf("Write after cancel = %v, want context.Canceled", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestDialAfterTheContextEnded(t *testing.T) {
	ln, socket := listen(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if c, err := Dial(ctx, socket); !errors.Is(err, context.Canceled) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Dial with an ended context = %v, want context.Canceled", err)
	}
	// Nothing was connected: the backlog is empty.
	ln.SetDeadline(time.Now())
	if c, err := ln.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		if c != nil {
			c.Close()
		}
		t.Errorf("Accept after Dial with an ended context = %v, want no connection", err)
	}
}

func TestDialFails(t *testing.T) {
	notASocket := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notASocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, closed := listen(t)
	ln.SetUnlinkOnClose(false)
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
			c, err := Dial(t.Context(), tc.socket)
			var ue *UnreachableError
			if !errors.Is(err, tc.want) || !errors.As(err, &ue) || ue.Socket != tc.socket {
				if c != nil {
					c.Close()
				}
				t.Errorf("Dial(%q) = %v, want an UnreachableError with %v", tc.socket, err, tc.want)
			}
		})
	}
}
