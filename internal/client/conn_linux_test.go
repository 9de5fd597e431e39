package client

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A listener whose backlog is full refuses at once: a blocking connect
// would hold marshalctl where an interrupt cannot reach it.
func TestDialRefusedWhenTheBacklogIsFull(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s")
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
	var conns []*Conn
	go func() {
		for range 8 {
			c, err := Dial(t.Context(), socket)
			if err != nil {
				done <- err
				return
			}
			conns = append(conns, c)
		}
		done <- nil
	}()
	var ue *UnreachableError
	if err := await(t, "dialing a full backlog", done); !errors.Is(err, syscall.EAGAIN) || !errors.As(err, &ue) {
		t.Errorf("dialing a full backlog: %v, want an UnreachableError with EAGAIN", err)
	}
	for _, c := range conns {
		c.Close()
	}
}
