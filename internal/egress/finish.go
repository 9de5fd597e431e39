package egress

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/peer"
)

// newRecord begins the record of req, a request on c: who asked, and
// where to as far as the request says.
func (p *Proxy) newRecord(c *conn, req request) *Record {
	rec := &Record{
		Time:      p.opts.Clock.Now().UTC(),
		Transport: c.peer.Transport,
		Protocol:  req.protocol,
		PID:       c.peer.PID,
		Host:      req.host,
		Port:      req.port,
	}
	if c.who.Scoped() {
		rec.Scope, rec.Profile, rec.Workspace, rec.Attempt = c.who.Scope, c.who.Profile, c.who.Workspace, c.who.Attempt
	} else {
		rec.Unscoped, rec.Claimed, rec.Namespace = c.who.Unscoped, c.who.Claimed.Scope, c.who.Home
	}
	return rec
}

// observe counts a decision that took d.
func (p *Proxy) observe(rec *Record, d time.Duration) {
	if p.opts.Metrics != nil {
		p.opts.Metrics.ObserveEgress(rec.Profile, rec.Verdict, d)
	}
}

// finish closes rec once its request is over: who the peer process was,
// how long it lasted; then audits it and reports a denial.
func (p *Proxy) finish(c *conn, rec *Record) {
	if rec.Verdict == "" {
		rec.Verdict = VerdictError
	}
	if rec.PID == 0 {
		p.lookForOwner(c)
		if c.owner != nil {
			rec.PID, rec.Command = c.owner()
		}
	} else {
		rec.Command = command(rec.PID)
	}
	rec.Duration = localapi.Milliseconds(p.opts.Clock.Since(rec.Time))
	if p.opts.Audit != nil {
		p.opts.Audit.Audit(rec)
	}
	if rec.Verdict == VerdictDeny && p.events != nil {
		p.events.denied(rec)
	}
}

// lookForOwner starts looking, once, for the process of c's launch that
// holds the peer's TCP socket, for the audit record; c.owner then waits
// for the answer. The search runs beside the connection, so it adds
// nothing to the time to connect: it starts once the request is decided
// (a denied peer waits for its answer, which waits for the search) or,
// for a tunnel, once it is open, while the peer still holds its socket.
func (p *Proxy) lookForOwner(c *conn) {
	if c.owner != nil || !c.who.Scoped() {
		return
	}
	c.owner = p.findOwner(c.peer)
}

// awaitOwner waits for the search lookForOwner started, if any. Every
// answer to the peer waits for it, so that a peer that waits for an
// answer still holds its socket when it is looked for: a tool that exits
// once answered would otherwise often be gone first, and its audit record
// name no process. The search started with the request, so the wait is
// what is left of it, tens of microseconds at most.
func (c *conn) awaitOwner() {
	if c.owner != nil {
		c.owner()
	}
}

func (p *Proxy) findOwner(pr *peer.Peer) func() (int, string) {
	if pr.Transport != TransportTCP {
		return nil
	}
	type owner struct {
		pid  int
		comm string
	}
	ch := make(chan owner, 1)
	p.wg.Go(func() {
		pid := p.ident.Owner(pr)
		ch <- owner{pid, command(pid)}
	})
	var got *owner
	return func() (int, string) {
		if got == nil {
			o := <-ch
			got = &o
		}
		return got.pid, got.comm
	}
}

// command is process pid's name, "" when it is gone.
func command(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}
