package egress

import (
	"io"
	"net"
	"sync"
	"time"
)

// chunk is how much a tunnel copies between two updates of the byte
// counters: each chunk is spliced in the kernel.
const chunk = 1 << 20

// tunnel copies between the client c and up until both directions end,
// writing early to up first, and returns the bytes that went out to up
// and came in from it. A direction that ends half-closes the other side;
// an error, or nothing carried either way for the idle timeout, ends
// both. It closes both connections. check, when not nil, reads the
// client's first bytes (early's first) and says what of them goes up, or
// that nothing does and both end, and why; the other direction runs
// meanwhile.
func (p *Proxy) tunnel(c *conn, up net.Conn, early []byte, check helloCheck) (got carried) {
	client, profile := c.raw(), c.who.Profile
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			up.Close()
			c.Close()
		})
	}
	defer closeBoth()
	if len(early) > 0 && check == nil {
		n, err := up.Write(early)
		got.out += int64(n)
		p.countBytes(profile, int64(n), 0)
		if err != nil {
			return got
		}
	}
	idle := p.watchIdle(up, closeBoth)
	defer idle.Stop()

	var wg sync.WaitGroup
	var sent int64
	wg.Go(func() {
		if check != nil {
			var ok bool
			if sent, got.hello, ok = p.checkFirst(client, up, early, profile, check); !ok {
				closeBoth()
				return
			}
		}
		sent += p.copyChunks(up, client, func(n int64) { p.countBytes(profile, n, 0) })
		halfClose(up, closeBoth)
	})
	c.awaitOwner()
	got.in = p.copyChunks(client, up, func(n int64) { p.countBytes(profile, 0, n) })
	halfClose(client, closeBoth)
	wg.Wait()
	got.out += sent
	return got
}

// copyChunks copies src to dst chunk by chunk until src ends or either
// fails, calling counted with each chunk's size.
func (p *Proxy) copyChunks(dst io.Writer, src io.Reader, counted func(int64)) int64 {
	var total int64
	lr := &io.LimitedReader{R: src}
	for {
		lr.N = chunk
		n, err := io.Copy(dst, lr)
		total += n
		if n > 0 {
			counted(n)
		}
		if err != nil || n < chunk {
			return total
		}
	}
}

func (p *Proxy) countBytes(profile string, out, in int64) {
	if p.opts.Metrics != nil && (out > 0 || in > 0) {
		p.opts.Metrics.AddEgressBytes(profile, out, in)
	}
}

// halfClose says to c's peer that nothing more will be written; a
// connection that cannot half-close is closed, with its partner.
func halfClose(c net.Conn, closeBoth func()) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	closeBoth()
}

// raw returns the accepted connection itself once nothing peeked is left
// to read, so that copies from it are spliced by the kernel.
func (c *conn) raw() net.Conn {
	if len(c.peeked) == 0 {
		return c.Conn
	}
	return c
}

// idleTimer closes a tunnel that carried nothing for the idle timeout.
type idleTimer struct {
	mu sync.Mutex
	t  *time.Timer
}

func (i *idleTimer) Stop() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.t != nil {
		i.t.Stop()
	}
}

// watchIdle arms the idle timer of a tunnel to up. When it fires, the
// kernel says when up last carried data either way (every byte of the
// tunnel passes through it), so the copies themselves keep no clock: a
// tunnel that was busy is looked at again when its idle time would end.
func (p *Proxy) watchIdle(up net.Conn, closeBoth func()) *idleTimer {
	i := &idleTimer{}
	limit := p.opts.IdleTimeout
	var check func()
	check = func() {
		quiet, ok := quietFor(up)
		if !ok || quiet >= limit {
			closeBoth()
			return
		}
		i.mu.Lock()
		i.t = time.AfterFunc(limit-quiet, check)
		i.mu.Unlock()
	}
	i.mu.Lock()
	i.t = time.AfterFunc(limit, check)
	i.mu.Unlock()
	return i
}
