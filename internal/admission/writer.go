package admission

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/utils/clock"
)

// maxBatch bounds how many waiting requests one transaction takes.
const maxBatch = 1024

// request is one call waiting for the writer.
type request struct {
	ctx context.Context
	// now is the moment before the request was taken.
	now  time.Time
	fn   func(b *batch) (any, error)
	val  any
	err  error
	done chan struct{}
}

// ledger is the writer's view of what the journal holds beyond the
// records themselves. The writer goroutine alone changes it, under
// Authority.mu, which Snapshot and Charged hold to read totals and
// charged.
type ledger struct {
	totals totals
	// keys maps every recorded attempt's ID to its journal sequence; next
	// is the sequence of the next new attempt.
	keys map[string]uint64
	next uint64
	// charged holds the committed record of every charged attempt: the
	// attempts a launch reads and changes, which would otherwise be
	// decoded from the journal in every transaction that touches them.
	// Records are immutable; each is the ledger's own copy.
	charged  map[string]*Record
	prepared map[string]time.Time // deadline of every prepared attempt
	due      deadlines            // the same, in deadline order; may hold stale entries
	owners   map[string]ownerRecord
	// instances are the consumers' registered instances.
	instances map[instanceKey]instanceRecord
}

type deadline struct {
	at time.Time
	id string
}

// deadlines is a min-heap of prepared attempts' deadlines.
type deadlines []deadline

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].at.Before(d[j].at) }
func (d deadlines) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *deadlines) Push(x any)        { *d = append(*d, x.(deadline)) }
func (d *deadlines) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// batch is one write transaction shared by the requests that were waiting
// when it began. Requests stage their changes in memory; nothing reaches
// the transaction until every request has run, so a request that fails is
// undone by dropping what it staged, and the others commit without it.
type batch struct {
	a *Authority
	// tx reads the journal, begun when a request first needs it.
	tx *bolt.Tx
	// Staged state, layered over the ledger; recs over the journal too.
	recs      overlay[string, *Record]
	owners    overlay[string, ownerRecord]
	instances overlay[instanceKey, instanceRecord]
	totals    totals
	// keys holds the sequences of the attempts this batch records first
	// over the ledger's; next is the one the next new attempt gets.
	keys overlay[string, uint64]
	next uint64
	// undo restores the staged state; a request's entries are replayed
	// backwards when it fails.
	undo []func()
	// checkpoint asks that the commit bring the journal up to date with
	// its log; committed runs on the writer after the commit succeeded.
	checkpoint bool
	committed  []func()
}

func (a *Authority) newBatch() *batch {
	b := &batch{a: a, totals: a.led.totals, next: a.led.next}
	b.recs = newOverlay[string, *Record](nil, &b.undo)
	b.owners = newOverlay(a.led.owners, &b.undo)
	b.instances = newOverlay(a.led.instances, &b.undo)
	b.keys = newOverlay(a.led.keys, &b.undo)
	return b
}

// key returns the journal sequence of an attempt recorded before or in
// this batch.
func (b *batch) key(id string) (uint64, bool) { return b.keys.get(id) }

func (b *batch) dirty() bool {
	return len(b.recs.staged)+len(b.owners.staged)+len(b.instances.staged) > 0
}

func (b *batch) rollback(mark int) {
	for i := len(b.undo) - 1; i >= mark; i-- {
		b.undo[i]()
	}
	b.undo = b.undo[:mark]
}

// record returns the attempt as staged or stored, or nil. Records are
// immutable once staged or stored: callers change a clone and put it.
func (b *batch) record(id string) (*Record, error) {
	if r, ok := b.recs.get(id); ok {
		return r, nil
	}
	if r := b.a.led.charged[id]; r != nil {
		// A copy: what a request returns may leave the package, and the
		// ledger's own must not change with it.
		return r.clone(), nil
	}
	seq, ok := b.key(id)
	if !ok {
		return nil, nil
	}
	k := attemptKey(seq)
	if data, ok := b.a.pending[walKey{walAttempts, string(k)}]; ok {
		return decodeRecord(seq, id, data)
	}
	if b.tx == nil {
		tx, err := b.a.db.Begin(false)
		if err != nil {
			return nil, err
		}
		b.tx = tx
	}
	return decodeRecord(seq, id, b.tx.Bucket(bucketAttempts).Get(k))
}

// endRead ends the batch's read of the journal, which must end before
// anything commits: a commit may wait for every reader.
func (b *batch) endRead() {
	if b.tx != nil {
		b.tx.Rollback()
		b.tx = nil
	}
}

// load returns the attempt as of now: a prepared attempt at or past its
// deadline is expired first.
func (b *batch) load(id string, now time.Time) (*Record, error) {
	r, err := b.record(id)
	if err != nil || r == nil {
		return r, err
	}
	if r.Phase == PhasePrepared && !now.Before(r.Reservation.Deadline) {
		n := r.clone()
		n.Phase = PhaseExpired
		if err := b.put(r, n); err != nil {
			return nil, err
		}
		return n, nil
	}
	return r, nil
}

// put stages next in place of prev (nil for a new attempt) and moves the
// charged totals by the difference.
func (b *batch) put(prev, next *Record) error {
	if err := next.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	id := next.ID
	if _, known := b.key(id); !known {
		// A sequence given up by a failed request is a harmless gap.
		b.keys.set(id, b.next)
		b.next++
	}
	oldTotals := b.totals
	b.undo = append(b.undo, func() { b.totals = oldTotals })
	b.recs.set(id, next)
	b.totals.Charged = b.totals.Charged.Sub(prev.charge()).Add(next.charge())
	if prev != nil && prev.Phase.Charged() {
		b.totals.Count--
	}
	if next.Phase.Charged() {
		b.totals.Count++
	}
	return nil
}

func (b *batch) owner(name string) (ownerRecord, bool) { return b.owners.get(name) }

func (b *batch) putOwner(o ownerRecord) { b.owners.set(o.Name, o) }

// expireDue expires every prepared attempt whose deadline is at or
// before now. It runs outside any request, so no request's failure undoes
// it.
func (b *batch) expireDue(now time.Time) error {
	due := &b.a.led.due
	for due.Len() > 0 && !now.Before((*due)[0].at) {
		d := heap.Pop(due).(deadline)
		if _, err := b.load(d.id, now); err != nil {
			return err
		}
	}
	return nil
}

// flush returns the staged state as puts.
func (b *batch) flush() ([]put, error) {
	puts, err := recordPuts(b.recs.staged, b.key, b.totals)
	if err != nil {
		return nil, err
	}
	for k, r := range b.instances.staged {
		data, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		puts = append(puts, put{walInstances, k.bytes(), data})
	}
	for name, o := range b.owners.staged {
		data, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		puts = append(puts, put{walOwners, []byte(name), data})
	}
	return puts, nil
}

// apply publishes a committed batch to the ledger.
func (a *Authority) apply(b *batch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := &a.led
	l.totals = b.totals
	for id, seq := range b.keys.staged {
		l.keys[id] = seq
	}
	l.next = b.next
	for id, r := range b.recs.staged {
		if r.Phase.Charged() {
			l.charged[id] = r.clone()
		} else {
			delete(l.charged, id)
		}
		if r.Phase == PhasePrepared {
			if _, ok := l.prepared[id]; !ok {
				l.prepared[id] = r.Reservation.Deadline
				heap.Push(&l.due, deadline{r.Reservation.Deadline, id})
			}
		} else {
			delete(l.prepared, id)
		}
	}
	for name, o := range b.owners.staged {
		l.owners[name] = o
	}
	for k, r := range b.instances.staged {
		l.instances[k] = r
	}
	a.committedLocked()
	a.notifyLocked()
}

// Run is the authority's writer: it takes the requests that wait, runs
// them in one transaction, commits, and only then answers them; and it
// expires prepared attempts at their deadlines. It blocks until ctx ends
// and returns nil then, having answered every request it took. A commit
// that fails refuses its requests (ErrJournalFailed: nothing recorded)
// and the writer goes on: the next request tries again.
func (a *Authority) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return fmt.Errorf("admission: Run called twice: %w", ErrClosed)
	}
	defer a.stop()
	a.writing.Lock()
	defer a.writing.Unlock()
	select {
	case <-a.stopped:
		return ErrClosed
	default:
	}
	timer := a.clock.NewTimer(time.Hour)
	defer timer.Stop()
	armed := a.arm(timer)
	for {
		var expiry <-chan time.Time
		switch armed {
		case dueNow:
			expiry = fired
		case dueLater:
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.stopped:
			return nil
		case r := <-a.queue:
			armed = a.runBatch(r, timer)
		case <-expiry:
			armed = a.runBatch(nil, timer)
		}
		if rearmed, ok := a.takeUpLog(timer); ok {
			armed = rearmed
		}
	}
}

// When the next expiry is due.
type due int

const (
	dueNever due = iota
	dueLater
	dueNow
)

// fired is a channel that always delivers: an expiry already due.
var fired = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// arm sets timer to the earliest deadline of a prepared attempt, dropping
// stale heap entries, and no earlier than the next try after a failed
// commit. A deadline already passed is due now rather than a zero timer:
// that is on time whatever the clock does with zero timers.
func (a *Authority) arm(timer clock.Timer) due {
	if !timer.Stop() {
		select {
		case <-timer.C():
		default:
		}
	}
	q := &a.led.due
	for q.Len() > 0 {
		top := (*q)[0]
		if at, ok := a.led.prepared[top.id]; ok && at.Equal(top.at) {
			now := a.clock.Now()
			d := max(top.at.Sub(now), a.retryAt.Sub(now))
			if d <= 0 {
				return dueNow
			}
			timer.Reset(d)
			return dueLater
		}
		heap.Pop(q)
	}
	return dueNever
}

// runBatch runs first (nil: a deadline passed) and every request waiting
// behind it in one transaction, re-arms the expiry timer and answers.
func (a *Authority) runBatch(first *request, timer clock.Timer) (armed due) {
	reqs := a.reqs[:0]
	if first != nil {
		reqs = append(reqs, first)
	drain:
		for len(reqs) < maxBatch {
			select {
			case r := <-a.queue:
				reqs = append(reqs, r)
			default:
				break drain
			}
		}
	}
	a.reqs = reqs
	defer func() {
		armed = a.arm(timer)
		for i, r := range reqs {
			close(r.done)
			reqs[i] = nil
		}
	}()
	refuse := func(err error) {
		for _, r := range reqs {
			r.val, r.err = nil, err
		}
	}
	if err := a.fenced(); err != nil {
		refuse(err)
		return
	}
	b := a.newBatch()
	var err error
	if first == nil {
		err = b.expireDue(a.clock.Now())
	}
	for _, r := range reqs {
		if err != nil {
			break
		}
		if cerr := r.ctx.Err(); cerr != nil {
			r.err = cerr
			continue
		}
		if err = b.expireDue(r.now); err != nil {
			break
		}
		mark := len(b.undo)
		r.val, r.err = r.fn(b)
		if r.err != nil {
			b.rollback(mark)
		}
	}
	var puts []put
	if err == nil && b.dirty() {
		puts, err = b.flush()
	}
	b.endRead()
	if err != nil {
		refuse(a.commitFailed(err, false))
		return
	}
	if !b.dirty() && !b.checkpoint {
		// Nothing changed: nothing is written.
		return
	}
	if unknown, err := a.commit(puts, b.checkpoint); err != nil {
		refuse(a.commitFailed(err, unknown))
		return
	}
	if b.dirty() {
		a.apply(b)
	}
	for _, fn := range b.committed {
		fn()
	}
	return
}

// commit makes puts durable, as the log's next entry; in the journal
// itself, with everything the log holds, when checkpoint is asked, the
// entry would not fit an empty log, or there is no log. unknown reports
// that a failed commit's outcome is not known.
func (a *Authority) commit(puts []put, checkpoint bool) (unknown bool, err error) {
	w := a.wal
	if w == nil {
		if len(puts) == 0 {
			return false, nil
		}
		return a.counted(a.commitJournal(func(tx *bolt.Tx) error { return putAll(tx, puts) }))
	}
	n := w.encode(puts)
	if checkpoint || entryLen(n) > walSize {
		return a.counted(a.checkpoint(puts))
	}
	if w.reseal || !w.fits(n) {
		if unknown, err := a.counted(a.checkpoint(nil)); err != nil {
			return unknown, err
		}
	}
	if err := w.write(); err != nil {
		return true, err
	}
	a.commits.Add(1)
	a.pending.add(puts)
	return false, nil
}

// counted counts a commit an answer waits for.
func (a *Authority) counted(unknown bool, err error) (bool, error) {
	if err == nil {
		a.commits.Add(1)
	}
	return unknown, err
}

// logFull is how much of the log is used when the writer takes it up
// between batches.
const logFull = walSize / 4 * 3

// takeUpLog checkpoints a log that is filling up, between batches, so
// that no answer waits for the journal's own commit. A checkpoint that
// fails is a failed commit; the log still has room, and the next
// checkpoint is tried after the next batch.
func (a *Authority) takeUpLog(timer clock.Timer) (armed due, ok bool) {
	if a.wal == nil || a.wal.off < logFull || a.fenced() != nil {
		// A fenced journal is not written: the next start judges it.
		return 0, false
	}
	unknown, err := a.checkpoint(nil)
	if err != nil {
		a.commitFailed(err, unknown)
		return a.arm(timer), true
	}
	a.checkpoints.Add(1)
	return 0, false
}

// checkpoint brings the journal up to date with its log, and with puts,
// in one commit that renews the log's salt; the log starts over.
func (a *Authority) checkpoint(puts []put) (unknown bool, err error) {
	w := a.wal
	if len(a.pending) == 0 && len(puts) == 0 && !w.reseal {
		return false, nil
	}
	next := walState{salt: newSalt(), seq: w.state.seq}
	unknown, err = a.commitJournal(func(tx *bolt.Tx) error {
		if err := putAll(tx, a.pending.puts()); err != nil {
			return err
		}
		if err := putAll(tx, puts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyWAL, next.bytes())
	})
	if err != nil {
		return unknown, err
	}
	clear(a.pending)
	w.state, w.off, w.reseal = next, 0, false
	return false, nil
}

// commitJournal runs fn in a write transaction of the journal and commits
// it. unknown reports that a commit which failed may be in the journal
// all the same.
func (a *Authority) commitJournal(fn func(tx *bolt.Tx) error) (unknown bool, err error) {
	tx, err := a.db.Begin(true)
	if err != nil {
		return false, err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return false, err
	}
	txid := tx.ID()
	if err := tx.Commit(); err != nil {
		return a.journalHolds(txid), err
	}
	return false, nil
}
