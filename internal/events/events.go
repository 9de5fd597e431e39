package events

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// DefaultKeep is how many events are kept when Options.Keep is zero.
const DefaultKeep = 1000

// Store persists events. *state.DB is one.
type Store interface {
	WriteSeq(b state.Bucket, puts map[uint64][]byte, keep int) error
	Sequence(b state.Bucket) (uint64, error)
	ForEachSeq(b state.Bucket, fn func(seq uint64, value []byte) error) error
}

// Options configure a Recorder.
type Options struct {
	Store  Store // optional: without it, events live in memory only
	Clock  clock.Clock
	Keep   int
	Logger *slog.Logger
	// WriteDelay is how long Run lets recorded events gather before it
	// writes them, 0 for not at all: the events of a burst then cost one
	// commit, and none of its disk flushes lands in the moments after a
	// launch, while the agent starts. A crash loses at most the events
	// of its last WriteDelay.
	WriteDelay time.Duration
}

type dedupKey struct {
	typ     v1alpha1.EventType
	obj     reconcile.Key
	reason  string
	message string
}

// Recorder records events. It is safe for concurrent use. An event is
// seen (List) as soon as it is recorded; Run writes it to the store in
// the background, so that recording one never waits for the disk: a
// launch that is told as it starts is not slowed by its telling. A crash
// may lose the events of its last moments (Options.WriteDelay), never
// reorder them.
type Recorder struct {
	opts Options
	log  *slog.Logger
	wake chan struct{}

	// writing serializes the writes to the store, so that they reach it
	// in the order they were recorded. It is taken before mu.
	writing sync.Mutex

	// mu guards the fields below.
	mu      sync.Mutex
	events  []*v1alpha1.Event // oldest first, at most opts.Keep
	byKey   map[dedupKey]*v1alpha1.Event
	seq     uint64
	changed chan struct{} // closed and replaced whenever an event is recorded
	// pending is what the store is still to be told, by Seq: an event,
	// or nil for one a repeat replaced. Events are never changed once
	// recorded, so the writer encodes them, off the recording's path.
	pending map[uint64]*v1alpha1.Event
	// stopped is set once Run has ended: from then on each event is
	// written before its recording returns.
	stopped bool
}

// New returns a Recorder holding the events persisted in opts.Store.
func New(opts Options) (*Recorder, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{opts: opts, log: log, wake: make(chan struct{}, 1), byKey: map[dedupKey]*v1alpha1.Event{}, changed: make(chan struct{})}
	if opts.Store != nil {
		seq, err := opts.Store.Sequence(state.Events)
		if err != nil {
			return nil, err
		}
		r.seq = seq
		err = opts.Store.ForEachSeq(state.Events, func(seq uint64, v []byte) error {
			var e v1alpha1.Event
			if json.Unmarshal(v, &e) != nil {
				return nil
			}
			e.Seq = seq
			r.add(&e)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Recorder) add(e *v1alpha1.Event) {
	r.events = append(r.events, e)
	r.byKey[keyOf(e)] = e
	r.seq = max(r.seq, e.Seq)
	for len(r.events) > r.opts.Keep {
		old := r.events[0]
		r.events = r.events[1:]
		if r.byKey[keyOf(old)] == old {
			delete(r.byKey, keyOf(old))
		}
	}
}

func keyOf(e *v1alpha1.Event) dedupKey {
	return dedupKey{e.Type, reconcile.Key{Kind: e.Object.Kind, Name: e.Object.Name}, e.Reason, e.Message}
}

// Normal records a routine event about obj.
func (r *Recorder) Normal(obj reconcile.Key, reason, message string) {
	r.Record(v1alpha1.EventNormal, obj, reason, message)
}

// Warning records an event about obj that needs attention.
func (r *Recorder) Warning(obj reconcile.Key, reason, message string) {
	r.Record(v1alpha1.EventWarning, obj, reason, message)
}

// WarningN records n repeats of a Warning about obj at once, as n calls
// of Warning would, with one write: for a caller that aggregates a burst.
func (r *Recorder) WarningN(obj reconcile.Key, reason, message string, n int64) {
	r.record(v1alpha1.EventWarning, obj, reason, message, n)
}

// Record records an event. A repeat of an event still kept is counted and
// moved to the end, with a new Seq.
func (r *Recorder) Record(typ v1alpha1.EventType, obj reconcile.Key, reason, message string) {
	r.record(typ, obj, reason, message, 1)
}

func (r *Recorder) record(typ v1alpha1.EventType, obj reconcile.Key, reason, message string, n int64) {
	if n <= 0 {
		return
	}
	if r.add1(typ, obj, reason, message, n) {
		r.flush()
	}
	if typ == v1alpha1.EventWarning {
		r.log.Warn(message, "object", obj.String(), "reason", reason)
	} else {
		r.log.Info(message, "object", obj.String(), "reason", reason)
	}
}

// add1 records one event in memory and hands it to the writer; it
// reports whether the caller must write it, Run not running.
func (r *Recorder) add1(typ v1alpha1.EventType, obj reconcile.Key, reason, message string, n int64) (flush bool) {
	now := r.opts.Clock.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := dedupKey{typ, obj, reason, message}
	e := &v1alpha1.Event{
		Type: typ, Object: v1alpha1.ObjectReference{Kind: obj.Kind, Name: obj.Name},
		Reason: reason, Message: message, Count: n, FirstSeen: now, LastSeen: now,
	}
	if old := r.byKey[k]; old != nil {
		e.Count, e.FirstSeen = old.Count+n, old.FirstSeen
		r.remove(old)
	}
	e.Seq = r.seq + 1
	r.add(e)
	close(r.changed)
	r.changed = make(chan struct{})
	if r.opts.Store == nil {
		return false
	}
	r.pend(e.Seq, e)
	if r.stopped {
		return true
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return false
}

// pend hands the store's entry seq to the writer. The caller holds r.mu.
func (r *Recorder) pend(seq uint64, e *v1alpha1.Event) {
	if r.pending == nil {
		r.pending = map[uint64]*v1alpha1.Event{}
	}
	r.pending[seq] = e
}

// Run writes recorded events to the store, those recorded before it
// began first, each Options.WriteDelay after the first of them, until
// ctx ends, and then what is still pending. Events recorded after it has
// ended are written before their recording returns. Without Run, a
// Recorder with a Store persists nothing.
func (r *Recorder) Run(ctx context.Context) {
	defer func() {
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		r.flush()
	}()
	r.flush()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			if !r.gather(ctx) {
				return
			}
			r.flush()
		}
	}
}

// gather waits Options.WriteDelay for more events to write with those
// pending, and reports false when ctx ended first.
func (r *Recorder) gather(ctx context.Context) bool {
	if r.opts.WriteDelay <= 0 {
		return true
	}
	t := r.opts.Clock.NewTimer(r.opts.WriteDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// flush writes what is pending in one transaction: a burst of events
// costs one commit.
func (r *Recorder) flush() {
	r.writing.Lock()
	defer r.writing.Unlock()
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(batch) == 0 || r.opts.Store == nil {
		return
	}
	puts := make(map[uint64][]byte, len(batch))
	for seq, e := range batch {
		var data []byte // nil: the event was replaced
		if e != nil {
			data, _ = json.Marshal(e)
		}
		puts[seq] = data
	}
	if err := r.opts.Store.WriteSeq(state.Events, puts, r.opts.Keep); err != nil {
		r.log.Error("persisting events", "events", len(batch), "err", err)
	}
}

// remove drops e, which a repeat replaces. The caller holds r.mu.
func (r *Recorder) remove(e *v1alpha1.Event) {
	for i, x := range r.events {
		if x == e {
			r.events = append(r.events[:i], r.events[i+1:]...)
			break
		}
	}
	delete(r.byKey, keyOf(e))
	if r.opts.Store != nil {
		r.pend(e.Seq, nil)
	}
}

// List returns the kept events with Seq above after, about obj when obj
// is not zero, oldest first, and a channel closed when another event is
// recorded (to wait for more).
func (r *Recorder) List(obj reconcile.Key, after uint64) ([]v1alpha1.Event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []v1alpha1.Event
	for _, e := range r.events {
		if e.Seq <= after {
			continue
		}
		if obj != (reconcile.Key{}) && (e.Object.Kind != obj.Kind || e.Object.Name != obj.Name) {
			continue
		}
		out = append(out, *e)
	}
	return out, r.changed
}
