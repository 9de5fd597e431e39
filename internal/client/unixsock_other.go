//go:build !linux

package client

import (
	"net"
	"time"
)

// unixSocket is a connected unix socket.
type unixSocket struct {
	c net.Conn
}

func dialUnix(path string) (*unixSocket, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &unixSocket{c: c}, nil
}

func (s *unixSocket) Read(p []byte) (int, error)  { return s.c.Read(p) }
func (s *unixSocket) Write(p []byte) (int, error) { return s.c.Write(p) }

// shutdown ends a Read or Write blocked in another goroutine.
func (s *unixSocket) shutdown() { s.c.SetDeadline(time.Unix(1, 0)) }

func (s *unixSocket) close() error { return s.c.Close() }
