package apiserver

import (
	"net"
	"net/http"
	"testing"
)

// A connection is counted under its uid from acceptance until the server
// says it closed (or was hijacked), never twice, and a uid at its bound
// gets no more until one closes.
func TestPeerConnsCountUntilClosed(t *testing.T) {
	pc := newPeerConns(2)
	a, b, c := pipe(t), pipe(t), pipe(t)
	if !pc.acquire(a, 1000) || !pc.acquire(b, 1000) {
		t.Fatal("two connections of uid 1000 refused under a bound of 2")
	}
	if pc.acquire(c, 1000) {
		t.Fatal("a third connection of uid 1000 counted over a bound of 2")
	}
	if !pc.acquire(c, 1001) {
		t.Fatal("uid 1001 refused: another uid's connections counted against it")
	}
	for _, st := range []http.ConnState{http.StateNew, http.StateActive, http.StateIdle} {
		pc.connState(a, st)
	}
	if pc.acquire(pipe(t), 1000) {
		t.Fatal("a connection not closed yet was released")
	}
	pc.connState(a, http.StateClosed)
	pc.connState(a, http.StateClosed) // said once more: released once
	if !pc.acquire(a, 1000) {
		t.Fatal("a closed connection's count was not released")
	}
	if pc.acquire(pipe(t), 1000) {
		t.Fatal("a closed connection was released twice")
	}
	pc.connState(b, http.StateHijacked)
	pc.connState(a, http.StateClosed)
	pc.connState(c, http.StateClosed)
	if len(pc.byUID) != 0 || len(pc.owner) != 0 {
		t.Errorf("after every connection closed: counts %v, owners %d; want none", pc.byUID, len(pc.owner))
	}
}

func pipe(t *testing.T) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}
