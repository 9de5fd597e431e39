package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// Defaults of the bounds on connections and requests (Options).
const (
	// DefaultHeaderTimeout bounds the reading of a request's line and
	// headers.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds the reading of a whole request body, from
	// the end of its headers: a full-size apply on a local socket takes
	// milliseconds.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultMaxConnsPerPeer bounds the connections one uid holds at once:
	// room for a user's several watches (get -w, events -w), the launches
	// of many agents in flight and the commands they run, while a peer
	// that opens connections without end holds at most this many.
	DefaultMaxConnsPerPeer = 64
)

// idleTimeout closes an abandoned idle keep-alive connection. It does not
// bound a watch, which is a request in progress.
const idleTimeout = 2 * time.Minute

// peerConns counts the admitted connections of each uid, for
// Options.MaxConnsPerPeer.
type peerConns struct {
	max int
	mu  sync.Mutex
	// byUID counts each uid's connections; owner names the uid a counted
	// connection is held under, until the server says it is closed.
	byUID map[uint32]int
	owner map[net.Conn]uint32
}

func newPeerConns(max int) *peerConns {
	return &peerConns{max: max, byUID: map[uint32]int{}, owner: map[net.Conn]uint32{}}
}

// acquire counts c under uid and reports true, or reports false when uid
// holds its limit already; c is then not counted.
func (pc *peerConns) acquire(c net.Conn, uid uint32) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.byUID[uid] >= pc.max {
		return false
	}
	pc.byUID[uid]++
	pc.owner[c] = uid
	return true
}

// connState releases a closed connection's count (http.Server.ConnState).
func (pc *peerConns) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	uid, ok := pc.owner[c]
	if !ok {
		return
	}
	delete(pc.owner, c)
	if pc.byUID[uid]--; pc.byUID[uid] <= 0 {
		delete(pc.byUID, uid)
	}
}

// boundBody gives the body of r, when it has one, BodyTimeout from now to
// arrive whole: a peer that trickles a body, or declares one it never
// sends, loses the connection then. Requests without a body (every GET,
// and so every watch) are left unbounded, so a watch lives as long as its
// peer wants. decode lifts the bound once the body is read.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)); err != nil {
		s.log.Warn("local API: cannot bound a request body", "err", err)
	}
}

// unboundBody lifts boundBody's bound once the body is read, so that the
// server's watch for the peer going away (which ends the request's
// context) reads without a deadline.
func unboundBody(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// overLimit is the answer to each request of a connection over its
// peer's limit.
func (s *Server) overLimit(uid uint32) *localapi.Error {
	return &localapi.Error{Code: localapi.CodeUnavailable, Message: fmt.Sprintf(
		"uid %d holds %d connections to marshald, the most it serves one user at once; "+
			"end some (watches, or runs still starting) and try again", uid, s.opts.MaxConnsPerPeer)}
}

// connCounted is the hook of http.Server.ConnState.
func (s *Server) connCounted(c net.Conn, st http.ConnState) { s.conns.connState(c, st) }
