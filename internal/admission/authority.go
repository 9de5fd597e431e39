package admission

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/internal/admission/pressure"
)

// Options configures Open. Zero fields take the defaults.
type Options struct {
	// Clock is the real clock by default.
	Clock clock.Clock
	// Inspector reads kernel identities; Procfs by default.
	Inspector Inspector
	// Pressure is the pressure level in force. Without one the authority
	// stays closed: critical, not_sampled.
	Pressure PressureSource
	// Measure measures the machine for capacity the Host omits;
	// MeasureMachine by default.
	Measure func() (Machine, error)
	// LockTimeout is how long Open waits for the journal's lock;
	// DefaultLockTimeout by default.
	LockTimeout time.Duration
	// Profiles reports whether a Profile is declared, for the attempts
	// of consumers, which name their profile themselves; without it
	// every profile name counts as declared.
	Profiles func(name string) bool
	// Uptime is the time since boot (CLOCK_BOOTTIME), which consumers'
	// records tell time by; the kernel's by default.
	Uptime func() time.Duration

	// maxSize, when set by tests, caps the journal file's size so that a
	// commit that must grow it fails: a real write failure on demand.
	maxSize int
}

// Authority is the admission authority over one journal. Its methods are
// safe for concurrent use; they block until Run has answered them, so Run
// must be running.
type Authority struct {
	db        *bolt.DB
	clock     clock.Clock
	inspector Inspector
	pressure  PressureSource
	measure   func() (Machine, error)
	bootID    string
	// self is the process the authority runs in, its start time 0 when
	// unknown: a principal that is this process is alive.
	self Process
	// epoch tells principals of this opening from those of an earlier one.
	epoch uint64

	profiles func(name string) bool
	uptime   func() time.Duration

	// regMu guards registered: the principals of the instances registered
	// since the authority was opened.
	regMu      sync.Mutex
	registered map[instanceKey]Principal

	queue    chan *request
	stopped  chan struct{}
	stopOnce sync.Once
	running  atomic.Bool
	// reqs is the writer's reusable request slice.
	reqs []*request
	// retry is the wait before expiry tries again after a failed commit,
	// retryAt when; zero while commits succeed. The writer alone uses them.
	retry   time.Duration
	retryAt time.Time

	// wal is the journal's write-ahead log, nil when it could not be made:
	// then every commit is the journal's own. pending is what the log
	// holds beyond the journal. The writer alone uses them, and Close
	// once the writer is done; writing is held while it is.
	wal     *wal
	logErr  error // why there is no log
	pending walPending
	writing sync.Mutex
	// commits counts the durable commits answers waited for: entries of
	// the log and the journal's own; checkpoints counts the log taken up
	// between batches.
	commits     atomic.Int64
	checkpoints atomic.Int64

	// inMu guards the field that follows.
	inMu   sync.Mutex
	inputs hostInputs

	// mu guards the fields that follow. The writer goroutine changes led
	// under it and reads led without it, being its only writer. inMu and
	// mu are never held together.
	mu      sync.Mutex
	led     ledger
	journal journalState
	changed chan struct{} // closed at the next commit, and when the journal's state changes
}

// Open opens the journal at path, checks it, recovers it for this boot
// and returns the authority; Run must then be started. A missing,
// corrupt, foreign, unknown-schema or inconsistent journal is refused
// (ErrJournalMissing, ErrJournalCorrupt, ErrJournalForeign,
// ErrJournalSchema, ErrJournalInconsistent) and left as it was; a journal
// another process holds is ErrJournalInUse.
//
// A journal of schema 2 is made schema 3 first, in a transaction of its
// own. Recovery, in one transaction and only if it changes something: prepared
// attempts of an earlier boot expire, other charged attempts of an
// earlier boot are released (previous_boot), and committed attempts of
// this boot become suspect until evidence settles them.
func Open(path string, opts Options) (*Authority, error) {
	a := &Authority{
		clock:      opts.Clock,
		inspector:  opts.Inspector,
		pressure:   opts.Pressure,
		measure:    opts.Measure,
		profiles:   opts.Profiles,
		uptime:     opts.Uptime,
		registered: map[instanceKey]Principal{},
		queue:      make(chan *request),
		stopped:    make(chan struct{}),
		changed:    make(chan struct{}),
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.inspector == nil {
		a.inspector = Procfs{}
	}
	if a.pressure == nil {
		a.pressure = pressure.Fixed{Level: pressure.Critical, Reason: pressure.ReasonNotSampled}
	}
	if a.measure == nil {
		a.measure = MeasureMachine
	}
	if a.uptime == nil {
		a.uptime = bootUptime
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	boot, err := a.inspector.BootID()
	if err != nil {
		return nil, err
	}
	a.bootID = boot
	a.self.PID = os.Getpid()
	if start, err := a.inspector.StartTime(a.self.PID); err == nil {
		a.self.StartTime = start
	}
	var e [8]byte
	rand.Read(e[:])
	a.epoch = binary.LittleEndian.Uint64(e[:]) | 1
	db, l, err := openBolt(path, timeout, opts.maxSize, boot)
	if err != nil {
		return nil, err
	}
	l, log, err := resumeLog(db, path+walSuffix, l, boot)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := recoverBoot(db, l, boot); err != nil {
		db.Close()
		return nil, fmt.Errorf("recovering %s: %w: %w", path, ErrJournalFailed, err)
	}
	a.db = db
	// Without a log, commits are slower, not less safe.
	a.wal, a.logErr = openLog(path+walSuffix, log)
	a.pending = walPending{}
	a.led = ledger{totals: l.totals, keys: l.keys, next: l.next, charged: l.charged, prepared: l.prepared, owners: l.owners, instances: l.instances}
	for id, at := range l.prepared {
		a.led.due = append(a.led.due, deadline{at, id})
	}
	heap.Init(&a.led.due)
	return a, nil
}

// recoverBoot settles for this boot, in one transaction, the charged
// attempts l lists for recovery (see recovered), and l's totals and
// charged set with them; a journal that needs none is not written.
func recoverBoot(db *bolt.DB, l *loaded, boot string) error {
	if len(l.recover) == 0 {
		return nil
	}
	recs := map[string]*Record{}
	t := l.totals
	for _, r := range l.recover {
		n := recovered(r, boot)
		recs[n.ID] = n
		t.Charged = t.Charged.Sub(r.charge()).Add(n.charge())
		if n.Phase.Charged() {
			l.charged[n.ID] = n
		} else {
			t.Count--
			delete(l.charged, n.ID)
		}
	}
	keyOf := func(id string) (uint64, bool) { seq, ok := l.keys[id]; return seq, ok }
	puts, err := recordPuts(recs, keyOf, t)
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error { return putAll(tx, puts) })
	}
	if err != nil {
		return err
	}
	l.totals = t
	return nil
}

// Close brings the journal up to date with its log and releases both and
// the journal's lock. It waits for Run to return; requests made after
// Close fail with ErrClosed. A journal whose checkpoint fails here loses
// nothing, and is no error: the log still holds it, and Open replays it.
func (a *Authority) Close() error {
	a.stop()
	a.writing.Lock()
	defer a.writing.Unlock()
	var err error
	if a.wal != nil {
		if a.fenced() == nil {
			// A checkpoint that fails loses nothing: the log holds it.
			a.checkpoint(nil)
		}
		err = a.wal.f.Close()
		a.wal = nil
	}
	return errors.Join(err, a.db.Close())
}

func (a *Authority) stop() { a.stopOnce.Do(func() { close(a.stopped) }) }

// do hands fn to the writer and waits for its answer. Once the writer has
// taken a request it always answers, after the commit, so the wait does
// not watch ctx: an answer given before the commit could be a lie.
//
// A journal that failed its last commit does not refuse a request here:
// the request is the next try, and it is refused only if its own commit
// fails too. A fenced journal refuses at once.
func (a *Authority) do(ctx context.Context, now time.Time, fn func(*batch) (any, error)) (any, error) {
	if err := a.fenced(); err != nil {
		return nil, err
	}
	r := &request{ctx: ctx, now: now, fn: fn, done: make(chan struct{})}
	select {
	case a.queue <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.stopped:
		if err := a.fenced(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
	<-r.done
	return r.val, r.err
}

func call[T any](ctx context.Context, a *Authority, now time.Time, fn func(*batch) (T, error)) (T, error) {
	v, err := a.do(ctx, now, func(b *batch) (any, error) { return fn(b) })
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// LogError returns why the journal has no write-ahead log, nil when it
// has one. It is for the daemon's log: it carries the system's words.
func (a *Authority) LogError() error { return a.logErr }

// Backup writes a consistent copy of the journal to w, with every commit
// answered before it was called, while the authority keeps serving; a
// commit that must grow the file waits until the copy is done. It needs
// Run: the writer brings the journal up to date with its log and begins
// the copy's read between two commits.
func (a *Authority) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var tx *bolt.Tx
	var txErr error
	_, err := a.do(ctx, a.clock.Now(), func(b *batch) (any, error) {
		b.checkpoint = true
		b.committed = append(b.committed, func() {
			tx, txErr = a.db.Begin(false)
			if a.wal != nil {
				// What the log holds next is the live journal's alone.
				a.wal.reseal = true
			}
		})
		return nil, nil
	})
	if err = errors.Join(err, txErr); err != nil {
		return 0, err
	}
	defer tx.Rollback()
	return tx.WriteTo(ctxWriter{ctx, w})
}

// BackupFile writes a consistent copy of the journal to a new file at
// path (mode 0600), synced before it returns; an existing file is never
// overwritten. The copy opens with Open like the original.
func (a *Authority) BackupFile(ctx context.Context, path string) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if _, err := a.Backup(ctx, f); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return f.Sync()
}
