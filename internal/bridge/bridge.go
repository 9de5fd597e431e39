package bridge

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/internal/acceptloop"
)

// DialTimeout bounds connecting to the proxy's socket.
const DialTimeout = 10 * time.Second

// Relay accepts connections on ln until ctx ends and relays each to the
// unix socket at socket, then closes ln and every relay, waits for them
// and returns nil. It returns an error, once everything stopped, when ln
// fails first.
func Relay(ctx context.Context, ln net.Listener, socket string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &relays{conns: map[net.Conn]struct{}{}}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		r.closeAll()
	})
	defer stop()
	err := r.accept(ctx, ln, socket)
	cancel()
	ln.Close()
	r.closeAll()
	r.wg.Wait()
	return err
}

// relays are the connections being relayed.
type relays struct {
	wg sync.WaitGroup
	// mu guards the fields that follow.
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	stopped bool
}

// accept accepts until ctx ends; a temporary failure (out of file
// descriptors) is waited out, as net/http does.
func (r *relays) accept(ctx context.Context, ln net.Listener, socket string) error {
	err := acceptloop.Run(ctx, ln, nil, func(c net.Conn) bool {
		if !r.track(c) {
			c.Close()
			return false
		}
		r.wg.Go(func() { r.relay(ctx, c, socket) })
		return true
	})
	if err != nil {
		return fmt.Errorf("bridge: accepting on %s: %w", ln.Addr(), err)
	}
	return nil
}

// relay carries c to the proxy and back. Each direction is half-closed
// when it ends, so a request that is all sent still gets its answer.
func (r *relays) relay(ctx context.Context, c net.Conn, socket string) {
	defer r.forget(c)
	d := net.Dialer{Timeout: DialTimeout}
	up, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		// The client sees its connection closed: there is no protocol
		// to say more in.
		return
	}
	if !r.track(up) {
		up.Close()
		return
	}
	defer r.forget(up)
	join(c, up)
}

// join carries c to up and back until both directions ended.
func join(c, up net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() { pipe(up, c) })
	pipe(c, up)
	wg.Wait()
}

// pipe copies from src to dst until src ends, then half-closes both
// ways it can: no more is written to dst, and no more is read from src.
func pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	if cr, ok := src.(interface{ CloseRead() error }); ok {
		cr.CloseRead()
	}
}

// track registers c, and reports false once the bridge is stopping.
func (r *relays) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relays) forget(c net.Conn) {
	c.Close()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// closeAll stops the bridge: every connection is closed, and none is
// taken after.
func (r *relays) closeAll() {
	r.mu.Lock()
	r.stopped = true
	open := make([]net.Conn, 0, len(r.conns))
	for c := range r.conns {
		open = append(open, c)
	}
	r.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}
