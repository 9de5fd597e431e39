package admission

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// PressureSource says which pressure level is in force; pressure.Monitor
// and pressure.Controller are ones.
type PressureSource interface {
	Status(now time.Time) pressure.Status
}

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

// hostInputs are what the host controller and the backend's probe set.
type hostInputs struct {
	capacity Budget
	source   CapacitySource
	ttl      time.Duration
	hostSet  bool
	plan     *Plan
	// consumers are those SetConsumers serves, by id; reserved their
	// static control reservations, which come off capacity; and
	// policyRevision what their attempts record.
	consumers      map[string]Consumer
	reserved       Budget
	policyRevision string
}

// work is the work capacity: the capacity less the consumers' static
// control reservations.
func (in hostInputs) work() Budget { return in.capacity.RemainingAfter(in.reserved) }

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
	if len(l.recover) > 0 {
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
			db.Close()
			return nil, fmt.Errorf("recovering %s: %w: %w", path, ErrJournalFailed, err)
		}
		l.totals = t
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

// Changed returns a channel that is closed when the journal next commits
// a change or the host's inputs (SetHost, SetPlan) move, for watchers of
// Snapshot and Charged.
func (a *Authority) Changed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// SetHost sets the work capacity from the Host's declared capacity (nil,
// or a field omitted: measured less SystemReservation) and its
// prepared_ttl (zero: v1alpha1.DefaultPreparedTTL). Existing reservations
// are never revoked when the capacity shrinks.
func (a *Authority) SetHost(capacity *v1alpha1.Capacity, preparedTTL time.Duration) error {
	if preparedTTL < 0 {
		return fmt.Errorf("prepared_ttl %s: %w", preparedTTL, ErrInvalidRequest)
	}
	if preparedTTL == 0 {
		preparedTTL = v1alpha1.DefaultPreparedTTL
	}
	b, src, err := WorkCapacity(capacity, a.measure)
	if err != nil {
		return err
	}
	a.inMu.Lock()
	a.inputs.capacity, a.inputs.source, a.inputs.ttl, a.inputs.hostSet = b, src, preparedTTL, true
	a.inMu.Unlock()
	a.inputsChanged()
	return nil
}

// inputsChanged wakes the watchers of Changed after the host's inputs
// moved: what Snapshot says (readiness, capacity, target) changed
// without a commit.
func (a *Authority) inputsChanged() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notifyLocked()
}

// SetPlan sets the per-resource plan from the cgroup backend's probe.
func (a *Authority) SetPlan(caps cgroup.Capabilities) error {
	p, err := PlanFrom(caps)
	if err != nil {
		return err
	}
	a.inMu.Lock()
	a.inputs.plan = &p
	a.inMu.Unlock()
	a.inputsChanged()
	return nil
}

func (a *Authority) hostInputs() hostInputs {
	a.inMu.Lock()
	defer a.inMu.Unlock()
	return a.inputs
}

// target scales capacity by the pressure level in force at now.
func target(capacity Budget, level pressure.Level) Budget {
	switch level {
	case pressure.Normal:
		return capacity
	case pressure.Constrained:
		return capacity.Half()
	}
	return Budget{}
}

// NotReady says why the authority cannot decide.
type NotReady string

// Reasons the authority cannot decide.
const (
	NotReadyHostUnset NotReady = "host_unset"
	NotReadyPlanUnset NotReady = "plan_unset"
	// NotReadyJournalFull: the last commit failed for want of space on the
	// journal's file system; the next request tries again.
	NotReadyJournalFull NotReady = "journal_full"
	// NotReadyJournalFailed: the last commit failed otherwise; the next
	// request tries again.
	NotReadyJournalFailed NotReady = "journal_failed"
	// NotReadyJournalUnknown: a commit reported failure but the journal
	// holds it, so what it did is unknown; everything is refused until
	// marshald restarts and Open checks the journal.
	NotReadyJournalUnknown NotReady = "journal_unknown"
)

// Snapshot is what `describe host` and metrics show.
type Snapshot struct {
	// Ready reports whether the authority can decide; NotReady says why
	// not.
	Ready    bool     `json:"ready"`
	NotReady NotReady `json:"not_ready,omitempty"`
	// JournalFailedAt is when the journal's commits began to fail, while
	// NotReady is one of the journal's reasons.
	JournalFailedAt time.Time `json:"journal_failed_at,omitzero"`
	// Capacity is the work capacity, after the consumers' static control
	// reservations (Reserved), and where each resource of it came from.
	Capacity       Budget         `json:"capacity"`
	Reserved       Budget         `json:"reserved"`
	CapacitySource CapacitySource `json:"capacity_source"`
	// Target is the capacity scaled by pressure; Committed what charged
	// attempts hold; Free what is left for new ones (never below zero).
	Target    Budget `json:"target"`
	Committed Budget `json:"committed"`
	Free      Budget `json:"free"`
	// Charged counts the charged attempts.
	Charged  int             `json:"charged"`
	Pressure pressure.Status `json:"pressure"`
	Plan     *Plan           `json:"plan,omitempty"`
	// PreparedTTL is how long a prepared attempt waits for its launch.
	PreparedTTL time.Duration `json:"prepared_ttl"`
	// BootID is the boot the authority runs in.
	BootID string `json:"boot_id"`
}

// Snapshot returns the authority's state as of the last commit.
func (a *Authority) Snapshot() Snapshot {
	in := a.hostInputs()
	now := a.clock.Now()
	ps := a.pressure.Status(now)
	a.mu.Lock()
	t, journal := a.led.totals, a.journal
	a.mu.Unlock()
	s := Snapshot{
		Capacity:       in.work(),
		Reserved:       in.reserved,
		CapacitySource: in.source,
		Committed:      t.Charged,
		Charged:        t.Count,
		Pressure:       ps,
		PreparedTTL:    in.ttl,
		BootID:         a.bootID,
	}
	if in.plan != nil {
		p := *in.plan
		s.Plan = &p
	}
	switch {
	case journal.err != nil:
		s.NotReady, s.JournalFailedAt = journal.reason(), journal.since
	case !in.hostSet:
		s.NotReady = NotReadyHostUnset
	case in.plan == nil:
		s.NotReady = NotReadyPlanUnset
	default:
		s.Ready = true
	}
	s.Target = target(in.work(), ps.Level)
	s.Free = s.Target.RemainingAfter(t.Charged)
	return s
}

// authorize checks that p is a registration of this opening that is still
// the owner's current one.
func (b *batch) authorize(p Principal) error {
	if p.instance != "" {
		return b.authorizeInstance(p)
	}
	if p.epoch != b.a.epoch || p.owner == "" {
		return fmt.Errorf("not registered with this authority: %w", ErrUnauthorized)
	}
	o, ok := b.owner(p.owner)
	if !ok || o.Generation != p.generation || o.Process != p.process {
		return fmt.Errorf("owner %q generation %d is not current: %w", p.owner, p.generation, ErrUnauthorized)
	}
	return nil
}

// owned loads the attempt if p's owner admitted it; to any other owner it
// is not found, and to a consumer's instance unauthorized (ownedByInstance).
func (b *batch) owned(p Principal, id string, now time.Time) (*Record, error) {
	if err := b.authorize(p); err != nil {
		return nil, err
	}
	r, err := b.load(id, now)
	if err != nil {
		return nil, err
	}
	if p.instance != "" {
		if r == nil {
			return nil, fmt.Errorf("attempt %s: %w", id, ErrNotFound)
		}
		return r, ownedByInstance(p, r)
	}
	if r == nil || r.Owner != p.owner || r.Generation != p.generation {
		return nil, fmt.Errorf("attempt %s: %w", id, ErrNotFound)
	}
	return r, nil
}

func validKey(id string) error {
	if !scope.ValidID(id) {
		return fmt.Errorf("attempt key must be %d lowercase hex digits: %w", scope.IDLength, ErrInvalidRequest)
	}
	return nil
}

// Register binds owner at generation to the caller's kernel identity: the
// uid and pid the transport read with SO_PEERCRED, with the start time and
// boot the authority reads itself. A first registration, or one with a
// higher generation from the same uid, is recorded; re-registering the
// same generation from the same process returns a principal and writes
// nothing. A lower generation, another process at the same generation,
// another uid or a caller that is not running is ErrUnauthorized.
func (a *Authority) Register(ctx context.Context, owner string, generation uint64, peer Peer) (Principal, error) {
	if !validOwner(owner) || generation == 0 || peer.PID <= 0 {
		return Principal{}, fmt.Errorf("owner %q generation %d pid %d: %w", owner, generation, peer.PID, ErrInvalidRequest)
	}
	start, err := a.inspector.StartTime(peer.PID)
	if errors.Is(err, ErrNoProcess) {
		return Principal{}, fmt.Errorf("pid %d is not running: %w", peer.PID, ErrUnauthorized)
	}
	if err != nil {
		return Principal{}, err
	}
	proc := Process{UID: peer.UID, PID: peer.PID, StartTime: start, BootID: a.bootID}
	return call(ctx, a, a.clock.Now(), func(b *batch) (Principal, error) {
		cur, ok := b.owner(owner)
		switch {
		case !ok:
		case cur.Process.UID != proc.UID:
			return Principal{}, fmt.Errorf("owner %q belongs to another uid: %w", owner, ErrUnauthorized)
		case generation < cur.Generation:
			return Principal{}, fmt.Errorf("owner %q generation %d is stale: %w", owner, generation, ErrUnauthorized)
		case generation == cur.Generation && cur.Process != proc:
			return Principal{}, fmt.Errorf("owner %q generation %d is held by another process: %w", owner, generation, ErrUnauthorized)
		}
		if !ok || generation > cur.Generation {
			b.putOwner(ownerRecord{Name: owner, Generation: generation, Process: proc})
		}
		return Principal{owner: owner, generation: generation, process: proc, epoch: a.epoch}, nil
	})
}

// Admit records attempt key for p: prepared, with a reservation whose
// deadline is prepared_ttl after the moment before the request was taken,
// or denied: resource_policy_unsupported when a minimum level is above
// the plan, resource_unavailable when the request does not fit what the
// target leaves in cpu, memory or tasks. A denial is recorded and final.
//
// A key admitted before returns its stored record, whatever capacity is
// free now, if digest and intent are the same and p admitted it;
// otherwise it is ErrAttemptConflict. Without host capacity or a plan it
// is ErrUnavailable, and nothing is recorded.
func (a *Authority) Admit(ctx context.Context, p Principal, key, digest string, intent Intent) (Record, error) {
	now := a.clock.Now()
	fp, err := admissionKey(key, digest, intent)
	if err != nil {
		return Record{}, err
	}
	return call(ctx, a, now, func(b *batch) (Record, error) { return b.admit(p, key, digest, fp, intent, now) })
}

// admissionKey checks an admission's key and returns the fingerprint of
// its digest and intent.
func admissionKey(key, digest string, intent Intent) (string, error) {
	if err := validKey(key); err != nil {
		return "", err
	}
	return Fingerprint(digest, intent)
}

// admit is Admit inside the batch.
func (b *batch) admit(p Principal, key, digest, fp string, intent Intent, now time.Time) (Record, error) {
	a := b.a
	if err := b.authorize(p); err != nil {
		return Record{}, err
	}
	r, err := b.load(key, now)
	if err != nil {
		return Record{}, err
	}
	if r != nil {
		if r.Fingerprint != fp || r.Owner != p.owner || r.Generation != p.generation {
			return Record{}, fmt.Errorf("attempt %s: %w", key, ErrAttemptConflict)
		}
		return *r, nil
	}
	in := a.hostInputs()
	if !in.hostSet || in.plan == nil {
		return Record{}, fmt.Errorf("no host capacity or plan yet: %w", ErrUnavailable)
	}
	n := &Record{
		ID: key, Owner: p.owner, Generation: p.generation, OwnerProcess: p.process,
		Digest: digest, Fingerprint: fp, Intent: intent, BootID: a.bootID,
	}
	b.decide(n, in, *in.plan, true, now)
	if err := b.put(nil, n); err != nil {
		return Record{}, err
	}
	return *n, nil
}

// decide makes n, a new attempt, prepared against what the host's
// inputs in leave free at now, or denied: resource_policy_unsupported
// when the request is not allowed or plan does not satisfy its minimum,
// resource_unavailable when it does not fit the target.
func (b *batch) decide(n *Record, in hostInputs, plan Plan, allowed bool, now time.Time) {
	intent := n.Intent
	switch {
	case !allowed, !plan.Satisfies(intent.Minimum):
		n.Phase, n.Denial = PhaseDenied, DenialPolicyUnsupported
	case !intent.Requested.Fits(target(in.work(), b.a.pressure.Status(now).Level).RemainingAfter(b.totals.Charged)):
		n.Phase, n.Denial = PhaseDenied, DenialResourceUnavailable
	default:
		pl := plan.For(intent.Minimum)
		n.Phase, n.Plan = PhasePrepared, &pl
		n.Reservation = &Reservation{Quantities: intent.Requested, PreparedAt: now, Deadline: now.Add(in.ttl)}
	}
}

// BeginLaunch commits a prepared attempt to its launch before its
// deadline (prepared → launch_committed) and returns a one-time permit;
// only its hash is stored. For any other phase it returns the attempt and
// no permit: a replay never grants a second launch.
func (a *Authority) BeginLaunch(ctx context.Context, p Principal, key string) (Launch, error) {
	now := a.clock.Now()
	if err := validKey(key); err != nil {
		return Launch{}, err
	}
	return call(ctx, a, now, func(b *batch) (Launch, error) { return b.beginLaunch(p, key, now) })
}

// AdmitLaunch is Admit and, when the attempt is prepared, BeginLaunch,
// in one transaction: the attempt is recorded committed to its launch,
// with the permit, or denied, and nothing is recorded when either step
// fails. It is for an owner that launches as soon as it is admitted, at
// the cost of one durable commit instead of two. A replay answers as the
// two requests would: the stored record, and a permit only if the attempt
// was still prepared.
func (a *Authority) AdmitLaunch(ctx context.Context, p Principal, key, digest string, intent Intent) (Launch, error) {
	now := a.clock.Now()
	fp, err := admissionKey(key, digest, intent)
	if err != nil {
		return Launch{}, err
	}
	return call(ctx, a, now, func(b *batch) (Launch, error) {
		r, err := b.admit(p, key, digest, fp, intent, now)
		if err != nil || r.Phase != PhasePrepared {
			return Launch{Record: r}, err
		}
		return b.beginLaunch(p, key, now)
	})
}

// beginLaunch is BeginLaunch inside the batch.
func (b *batch) beginLaunch(p Principal, key string, now time.Time) (Launch, error) {
	r, err := b.owned(p, key, now)
	if err != nil {
		return Launch{}, err
	}
	if r.Phase != PhasePrepared {
		return Launch{Record: *r}, nil
	}
	permit := newPermit()
	n := r.clone()
	n.Phase, n.permitHash = PhaseLaunchCommitted, permit.hash()
	if err := b.put(r, n); err != nil {
		return Launch{}, err
	}
	return Launch{Record: *n, Permit: permit}, nil
}

// alive checks that the principal's process still runs as itself.
func (a *Authority) alive(p Principal) error {
	if p.process.PID == a.self.PID && p.process.StartTime == a.self.StartTime && a.self.StartTime != 0 {
		return nil // the process asking is the one answering
	}
	start, err := a.inspector.StartTime(p.process.PID)
	if errors.Is(err, ErrNoProcess) || (err == nil && start != p.process.StartTime) {
		return fmt.Errorf("pid %d is no longer the registered process: %w", p.process.PID, ErrUnauthorized)
	}
	return err
}

// BindScope binds a committed launch to its scope (launch_committed →
// scope_bound), on fresh read-back evidence that the scope named for the
// attempt exists and holds every planned limit; ev.ObservedAt must be at
// most MaxEvidenceAge before the call. The process recorded as the one
// moved into the scope is ev.Root when set, which must be running as
// itself (its start time, in this boot), and otherwise the caller's own.
// Binding the same scope again returns the record; a wrong permit is
// ErrUnauthorized, evidence that does not confirm the plan or names a
// root that is not running ErrEvidence, and any phase but
// launch_committed ErrInvalidTransition.
func (a *Authority) BindScope(ctx context.Context, p Principal, key string, permit Permit, ev ScopeEvidence) (Record, error) {
	root, err := a.bindable(p, key, ev)
	if err != nil {
		return Record{}, err
	}
	// Freshness is judged after the evidence was gathered.
	now, bound := a.clock.Now(), a.uptime()
	return call(ctx, a, now, func(b *batch) (Record, error) { return b.bindScope(p, key, permit, ev, root, now, bound) })
}

// BindAndAuthorize is BindScope and AuthorizeRun in one transaction: the
// scope is bound and the run authorized, or, when either step fails,
// nothing changes. It is for an owner that execs as soon as the scope is
// bound, at the cost of one durable commit instead of two. MayExec is
// true on the first authorization only, as AuthorizeRun's: a replay for
// the same scope answers MayExec false.
func (a *Authority) BindAndAuthorize(ctx context.Context, p Principal, key string, permit Permit, ev ScopeEvidence) (Run, error) {
	root, err := a.bindable(p, key, ev)
	if err != nil {
		return Run{}, err
	}
	now, bound := a.clock.Now(), a.uptime()
	return call(ctx, a, now, func(b *batch) (Run, error) {
		r, err := b.owned(p, key, now)
		if err != nil {
			return Run{}, err
		}
		// A replay once the run was authorized binds nothing again, and
		// is told MayExec false.
		if r.Phase != PhaseRunAuthorized || r.Scope != ev.Name {
			if _, err := b.bindScope(p, key, permit, ev, root, now, bound); err != nil {
				return Run{}, err
			}
		}
		return b.authorizeRun(p, key, permit, now, root)
	})
}

// bindable checks what BindScope checks outside the journal: the key,
// that the caller runs as the process it registered, and that the root
// the evidence names runs as itself. It returns the root to record: ev's,
// or the caller's own.
func (a *Authority) bindable(p Principal, key string, ev ScopeEvidence) (Process, error) {
	if err := validKey(key); err != nil {
		return Process{}, err
	}
	if err := a.alive(p); err != nil {
		return Process{}, err
	}
	if ev.Root == nil {
		return p.process, nil
	}
	if err := a.runsAsItself(*ev.Root); err != nil {
		return Process{}, fmt.Errorf("attempt %s: %w", key, err)
	}
	return *ev.Root, nil
}

// bindScope is BindScope inside the batch.
// bound is the time since boot, which a consumer's record keeps as when
// it was bound.
func (b *batch) bindScope(p Principal, key string, permit Permit, ev ScopeEvidence, root Process, now time.Time, bound time.Duration) (Record, error) {
	r, err := b.owned(p, key, now)
	if err != nil {
		return Record{}, err
	}
	if !permit.matches(r.permitHash) {
		return Record{}, fmt.Errorf("attempt %s: launch permit: %w", key, ErrUnauthorized)
	}
	if r.Phase == PhaseScopeBound && r.Scope == ev.Name {
		return *r, nil
	}
	if r.Phase != PhaseLaunchCommitted || r.Scope != "" {
		return Record{}, fmt.Errorf("attempt %s is %s: %w", key, r.Phase, ErrInvalidTransition)
	}
	switch {
	case ev.Name != r.scopeName():
		return Record{}, fmt.Errorf("attempt %s: evidence is for scope %q: %w", key, ev.Name, ErrEvidence)
	case !ev.fresh(now):
		return Record{}, fmt.Errorf("attempt %s: evidence observed at %s is not fresh: %w", key, ev.ObservedAt.Format(time.RFC3339Nano), ErrEvidence)
	case !ev.Exists:
		return Record{}, fmt.Errorf("attempt %s: scope does not exist: %w", key, ErrEvidence)
	case !r.Plan.confirms(ev.Applied, r.Reservation.Quantities):
		return Record{}, fmt.Errorf("attempt %s: read-back limits do not confirm the plan: %w", key, ErrEvidence)
	}
	n := r.clone()
	applied := ev.Applied
	applied.Enforced = maps.Clone(ev.Applied.Enforced)
	n.Phase, n.Scope, n.Root, n.Applied = PhaseScopeBound, ev.Name, &root, &applied
	if n.Key != nil {
		n.BoundMS = uint64(bound.Milliseconds())
	}
	if err := b.put(r, n); err != nil {
		return Record{}, err
	}
	return *n, nil
}

// AuthorizeRun authorizes the bound process to exec (scope_bound →
// run_authorized) and returns MayExec true, once. Asking again returns
// MayExec false, so a lost answer never permits a second exec. The caller
// must be the owner that bound the scope and present the permit, and the
// process bound into the scope must still be running as itself: the
// caller's own, or the root BindScope was given.
func (a *Authority) AuthorizeRun(ctx context.Context, p Principal, key string, permit Permit) (Run, error) {
	if err := validKey(key); err != nil {
		return Run{}, err
	}
	if err := a.alive(p); err != nil {
		return Run{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Run, error) { return b.authorizeRun(p, key, permit, now, p.process) })
}

// authorizeRun is AuthorizeRun inside the batch. verified is a process
// this request found running as itself before it was queued: a bound
// root that is verified is not read again.
func (b *batch) authorizeRun(p Principal, key string, permit Permit, now time.Time, verified Process) (Run, error) {
	r, err := b.owned(p, key, now)
	if err != nil {
		return Run{}, err
	}
	if !permit.matches(r.permitHash) {
		return Run{}, fmt.Errorf("attempt %s: launch permit: %w", key, ErrUnauthorized)
	}
	if r.Phase != PhaseScopeBound && r.Phase != PhaseRunAuthorized {
		return Run{}, fmt.Errorf("attempt %s is %s: %w", key, r.Phase, ErrInvalidTransition)
	}
	if r.Root == nil || *r.Root != verified && b.a.runsAsItself(*r.Root) != nil {
		return Run{}, fmt.Errorf("attempt %s: the bound process is not running: %w", key, ErrUnauthorized)
	}
	if r.Phase == PhaseRunAuthorized {
		return Run{Record: *r}, nil
	}
	n := r.clone()
	n.Phase = PhaseRunAuthorized
	if err := b.put(r, n); err != nil {
		return Run{}, err
	}
	return Run{Record: *n, MayExec: true}, nil
}

// AbandonLaunch is the owner's report that a committed launch created
// nothing and never will: its reservation is released (no_helper_created),
// which proves the execution never started. It applies to committed,
// draining or suspect attempts with no scope; an attempt with a scope is
// settled only by that scope's end (ErrInvalidTransition), as is a
// prepared one (cancel it instead). A settled attempt is returned as it
// is.
func (a *Authority) AbandonLaunch(ctx context.Context, p Principal, key string, reason AbandonReason) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	if !reason.valid() {
		return Record{}, fmt.Errorf("abandon reason %q: %w", reason, ErrInvalidRequest)
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.owned(p, key, now)
		if err != nil {
			return Record{}, err
		}
		return b.abandon(r, key, reason)
	})
}

// AbandonInherited is AbandonLaunch for an owner's successor: the report,
// by a later generation of the owner, that a launch an earlier generation
// committed created nothing and never will. An owner that restarts
// registers a new generation and can no longer act on its earlier
// attempts, yet it alone knows, from what it recorded before creating
// anything, that such a launch never made its scope. The attempt must be
// of p's owner, of an earlier generation whose process has ended (a
// generation still running may yet create the scope); any other is not
// found. The phases it applies to, and its answers, are AbandonLaunch's.
func (a *Authority) AbandonInherited(ctx context.Context, p Principal, key string, reason AbandonReason) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	if !reason.valid() {
		return Record{}, fmt.Errorf("abandon reason %q: %w", reason, ErrInvalidRequest)
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		if err := b.authorize(p); err != nil {
			return Record{}, err
		}
		r, err := b.load(key, now)
		if err != nil {
			return Record{}, err
		}
		if r == nil || r.Owner != p.owner || r.Generation >= p.generation || !a.processGone(r.OwnerProcess) {
			return Record{}, fmt.Errorf("attempt %s: %w", key, ErrNotFound)
		}
		return b.abandon(r, key, reason)
	})
}

// abandon releases r, a launch that created nothing (no_helper_created),
// for AbandonLaunch and AbandonInherited. A settled attempt is returned as
// it is; one with a scope, or prepared, is ErrInvalidTransition.
func (b *batch) abandon(r *Record, key string, reason AbandonReason) (Record, error) {
	switch {
	case r.Phase.Terminal():
		return *r, nil
	case r.Scope != "", r.Phase == PhasePrepared, r.Phase == PhaseScopeBound, r.Phase == PhaseRunAuthorized:
		return Record{}, fmt.Errorf("attempt %s is %s: %w", key, r.Phase, ErrInvalidTransition)
	}
	n := r.clone()
	n.Phase, n.Release, n.Abandoned = PhaseReleased, ReleaseNoHelperCreated, reason
	if err := b.put(r, n); err != nil {
		return Record{}, err
	}
	return *n, nil
}

// Cancel cancels an attempt: prepared → cancelled, returning its
// reservation; launch_committed, scope_bound or run_authorized → draining,
// which fences any late bind or authorization while the reservation stays
// charged until the scope ends. Draining, suspect and settled attempts
// are returned unchanged and nothing is written; a prepared attempt past
// its deadline reports that it expired.
func (a *Authority) Cancel(ctx context.Context, p Principal, key string) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.owned(p, key, now)
		if err != nil {
			return Record{}, err
		}
		var next Phase
		switch r.Phase {
		case PhasePrepared:
			next = PhaseCancelled
		case PhaseLaunchCommitted, PhaseScopeBound, PhaseRunAuthorized:
			next = PhaseDraining
		default:
			return *r, nil
		}
		n := r.clone()
		n.Phase = next
		if err := b.put(r, n); err != nil {
			return Record{}, err
		}
		return *n, nil
	})
}

// Lookup returns p's attempt key as of now.
func (a *Authority) Lookup(ctx context.Context, p Principal, key string) (Record, error) {
	return a.lookup(ctx, p, key, nil)
}

// lookup returns p's attempt key as of now, if check, when set, passes
// it.
func (a *Authority) lookup(ctx context.Context, p Principal, key string, check func(*Record) error) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.owned(p, key, now)
		if err == nil && check != nil {
			err = check(r)
		}
		if err != nil {
			return Record{}, err
		}
		return *r, nil
	})
}

// VerifyLaunch returns p's attempt key when permit is the one its launch
// was begun with, changing nothing, so that a launch can be refused
// before anything is made for it: a wrong permit, or an attempt never
// begun, is ErrUnauthorized.
func (a *Authority) VerifyLaunch(ctx context.Context, p Principal, key string, permit Permit) (Record, error) {
	return a.lookup(ctx, p, key, func(r *Record) error {
		if !permit.matches(r.permitHash) {
			return fmt.Errorf("attempt %s: launch permit: %w", key, ErrUnauthorized)
		}
		return nil
	})
}

// Reconcile settles a charged attempt on evidence of its scope, for the
// agent controller (a trusted caller: there is no principal). ev must
// name the scope of the attempt and be fresh, or it is ErrEvidence and
// nothing changes.
//
//   - A scope seen unpopulated, with its launched process known to have
//     exited, releases the attempt (scope_terminated).
//   - A bound scope that is missing is not evidence of anything: the
//     attempt becomes suspect, and stays so (scope_lost) until a reboot.
//   - An OOM kill is recorded, sticky: the run did not succeed.
//   - An unbound launch whose scope turns out to exist becomes suspect
//     with that scope, and is settled by its end; one without a scope is
//     left alone while its owner runs, and becomes suspect once the owner
//     is gone. Only the owner's AbandonLaunch releases it.
//
// Prepared and settled attempts are returned unchanged. When nothing
// changes nothing is written.
func (a *Authority) Reconcile(ctx context.Context, key string, ev ScopeEvidence) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.load(key, now)
		if err != nil {
			return Record{}, err
		}
		if r == nil {
			return Record{}, fmt.Errorf("attempt %s: %w", key, ErrNotFound)
		}
		if !r.Phase.Charged() || r.Phase == PhasePrepared {
			return *r, nil
		}
		if ev.Name != r.scopeName() || !ev.fresh(now) {
			return Record{}, fmt.Errorf("attempt %s: evidence for %q observed at %s: %w", key, ev.Name, ev.ObservedAt.Format(time.RFC3339Nano), ErrEvidence)
		}
		n := r.clone()
		terminated := ev.Exists && !ev.Populated && ev.ProcessExited
		if ev.Exists && ev.OOMKilled {
			n.OOMKilled = true
		}
		switch {
		case r.BootID != a.bootID:
			n.Phase, n.Release = PhaseReleased, ReleasePreviousBoot
		case r.Scope != "" && !ev.Exists:
			n.Phase, n.ScopeLost = PhaseSuspect, true
		case r.Scope != "" && terminated && !r.ScopeLost:
			n.Phase, n.Release = PhaseReleased, ReleaseScopeTerminated
		case r.Scope == "" && ev.Exists:
			n.Scope = ev.Name
			n.Phase = PhaseSuspect
			if terminated {
				n.Phase, n.Release = PhaseReleased, ReleaseScopeTerminated
			}
		case r.Scope == "" && r.Phase != PhaseSuspect:
			if !a.processGone(r.OwnerProcess) {
				break
			}
			n.Phase = PhaseSuspect
		}
		if n.Phase == r.Phase && n.Scope == r.Scope && n.OOMKilled == r.OOMKilled && n.ScopeLost == r.ScopeLost {
			return *r, nil
		}
		if err := b.put(r, n); err != nil {
			return Record{}, err
		}
		return *n, nil
	})
}

// runsAsItself checks that p, a process the caller names, runs as itself
// now: in this boot, with its start time. It is ErrEvidence otherwise.
func (a *Authority) runsAsItself(p Process) error {
	if p.PID <= 0 || p.BootID != a.bootID {
		return fmt.Errorf("process %d is not of this boot: %w", p.PID, ErrEvidence)
	}
	start, err := a.inspector.StartTime(p.PID)
	if errors.Is(err, ErrNoProcess) || (err == nil && start != p.StartTime) {
		return fmt.Errorf("process %d is not running as itself: %w", p.PID, ErrEvidence)
	}
	return err
}

// processGone reports whether p has certainly ended. A failed read is not
// proof.
func (a *Authority) processGone(p Process) bool {
	if p.BootID != a.bootID {
		return true
	}
	start, err := a.inspector.StartTime(p.PID)
	return errors.Is(err, ErrNoProcess) || (err == nil && start != p.StartTime)
}

// Charged returns every charged attempt as of the last commit, for the
// agent controller's reconcile pass, in the order of their IDs.
func (a *Authority) Charged(ctx context.Context) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	out := make([]Record, 0, len(a.led.charged))
	for _, r := range a.led.charged {
		out = append(out, *r.clone())
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y Record) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
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
