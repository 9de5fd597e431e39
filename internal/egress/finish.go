package egress

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// newRecord starts the record of a request on c.
func (p *Proxy) newRecord(c *conn, protocol string) *Record {
	rec := &Record{
		Time:      p.opts.Clock.Now().UTC(),
		Transport: c.peer.transport,
		Protocol:  protocol,
		PID:       c.peer.pid,
	}
	if c.who.scoped() {
		rec.Scope, rec.Profile, rec.Workspace, rec.Attempt = c.who.Scope, c.who.Profile, c.who.Workspace, c.who.Attempt
	} else {
		rec.Unscoped = c.who.unscoped
	}
	return rec
}

// observe counts a decision that took d.
func (p *Proxy) observe(rec *Record, d time.Duration) {
	if p.opts.Metrics != nil {
		p.opts.Metrics.ObserveEgress(rec.Profile, rec.Verdict, d)
	}
}

// finish completes rec once its connection is over: who the peer process
// was, how long it lasted; then audits it and reports a denial.
func (p *Proxy) finish(c *conn, rec *Record) {
	if rec.Verdict == "" {
		rec.Verdict = VerdictError
	}
	if rec.PID == 0 && c.owner != nil {
		rec.PID, rec.Command = c.owner()
	} else if rec.PID != 0 {
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

// findOwner starts looking for the process holding the socket of a TCP
// peer, and returns the function that waits for the answer. The search
// runs beside the request, so it adds nothing to the time to connect; it
// is done before the peer could have closed the socket, while it waits
// for the proxy's answer.
func (p *Proxy) findOwner(pr *peer) func() (int, string) {
	if pr.transport != TransportTCP || pr.sockInode == 0 {
		return nil
	}
	type owner struct {
		pid  int
		comm string
	}
	ch := make(chan owner, 1)
	p.wg.Go(func() {
		pid := socketOwner(p.opts.CgroupMount, pr.cgroup, pr.sockInode)
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
