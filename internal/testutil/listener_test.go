package testutil

import (
	"net"
	"testing"
)

func TestCheckClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := checkClosed(ln); err == nil {
		t.Error("an open listener passed as closed")
	}
	ln.Close()
	if err := checkClosed(ln); err != nil {
		t.Errorf("a closed listener: %v", err)
	}
}
