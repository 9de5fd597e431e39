package intake

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// Origin names where a Feed's units come from.
type Origin struct {
	// Key is what events about the origin itself (an emptying held, a
	// unit that declares nothing and fails, unless Unit names its object)
	// are recorded against.
	Key reconcile.Key
	// Name names the origin in messages, as "config dir /etc/marshal".
	Name string
	// Unit, when set, returns the object a unit stands for whatever it
	// loads to (an object of an API is one unit): the events of a unit
	// that declares nothing are recorded against it instead of Key.
	Unit func(unit string) (reconcile.Key, bool)
}

// unitKey returns what the events of unit are recorded against.
func (o Origin) unitKey(unit string) reconcile.Key {
	if o.Unit != nil {
		if k, ok := o.Unit(unit); ok {
			return k
		}
	}
	return o.Key
}

// Unit is what one unit of declaration (a file, an object of an API)
// declares now: its objects, or the errors that keep it from loading.
type Unit struct {
	// Objects are the unit's objects, loaded and validated; empty when
	// Errors is set.
	Objects []loader.Object
	// Errors are the unit's load errors.
	Errors []*loader.Error
}

// FeedOptions configure a Feed.
type FeedOptions struct {
	// Origin names where the units come from.
	Origin Origin
	// Sink receives the declarations. Required.
	Sink Sink
	// Store persists last good objects, in Bucket under each unit's
	// name, which starts with Prefix. Optional.
	Store  Store
	Bucket state.Bucket
	Prefix string
	// Recorder records events. Optional.
	Recorder Recorder
	// Logger logs. Optional.
	Logger *slog.Logger
}

// Feed turns units into declarations for a source of manifests (the
// config dir's files, the objects of an API): it declares
// the objects of every unit to a Sink, resolves an object declared twice
// and the single Host, keeps a unit's last good objects while it fails
// to load (persisted, so that a restart keeps them), and holds an
// emptying until its origin declares objects again or a person confirms.
// Its methods are safe for concurrent use; Sink calls come one at a time,
// in order.
type Feed struct {
	opts FeedOptions
	log  *slog.Logger
	// lastGood persists the last good objects; nil without a Store.
	lastGood *lastGood

	// mu guards decl, and serializes the sink's calls with it.
	mu   sync.Mutex
	decl *declarations
}

// NewFeed returns a Feed that declares nothing yet.
func NewFeed(opts FeedOptions) *Feed {
	if opts.Bucket == "" {
		opts.Bucket = state.LastGood
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Feed{opts: opts, log: log, decl: newDeclarations(opts.Origin)}
	if opts.Store != nil {
		f.lastGood = newLastGood(opts.Store, opts.Bucket, log)
	}
	return f
}

// Restore declares the last good objects persisted by an earlier run, so
// that a restart while the origin cannot be read keeps them, and returns
// the units it restored: the source must say, by Declare, which of them
// are gone.
func (f *Feed) Restore() (map[string]*Unit, error) {
	if f.opts.Store == nil {
		return nil, nil
	}
	restored := map[string]*Unit{}
	err := f.opts.Store.ForEach(f.opts.Bucket, func(unit string, v []byte) error {
		if !strings.HasPrefix(unit, f.opts.Prefix) {
			return nil
		}
		objs, err := decodeGood(unit, v)
		if err != nil {
			f.log.Warn("dropping unreadable last good state", "unit", unit, "err", err)
			return nil
		}
		restored[unit] = &Unit{Objects: objs}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("restoring last good manifests: %w", err)
	}
	f.Declare(restored, true)
	return restored, nil
}

// Run persists last good objects in the background until ctx ends, and
// then what is still pending. Without a Store it returns at once.
func (f *Feed) Run(ctx context.Context) {
	if f.lastGood != nil {
		f.lastGood.run(ctx)
	}
}

// Declare takes units as they are now (nil: the unit is gone). When hold
// is set (a list of the whole origin, which may be wrong), a change that
// leaves nothing declared is held; otherwise (a deletion someone made) it
// is carried out.
func (f *Feed) Declare(units map[string]*Unit, hold bool) {
	changed := make(map[string]*unitState, len(units))
	for name, u := range units {
		if u == nil {
			changed[name] = nil
			continue
		}
		changed[name] = &unitState{good: u.Objects, errs: u.Errors}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.carryLocked(f.decl.apply(changed, hold))
}

// carryLocked carries out what a change to the declarations asks for:
// record its events, tell the sink, persist its last good objects.
func (f *Feed) carryLocked(out outcome) {
	if out.nowHeld > 0 {
		f.log.Warn("emptied; holding its objects until it declares objects again or the emptying is confirmed",
			"origin", f.opts.Origin.Name, "objects", out.nowHeld)
	}
	for _, ev := range out.events {
		f.record(ev)
	}
	if len(out.changes) > 0 {
		f.opts.Sink.Declare(out.changes)
	}
	if f.lastGood != nil {
		f.lastGood.put(out.persist)
	}
}

func (f *Feed) record(ev event) {
	switch r := f.opts.Recorder; {
	case r == nil:
	case ev.warning:
		r.Warning(ev.key, ev.reason, ev.message)
	default:
		r.Normal(ev.key, ev.reason, ev.message)
	}
}

// ConfirmEmpty releases a hold: the emptying is taken as meant, and every
// object no longer declared is deleted. It reports whether there was a
// hold.
func (f *Feed) ConfirmEmpty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, released := f.decl.confirmEmpty()
	if released {
		f.carryLocked(out)
	}
	return released
}

// FeedStatus summarizes a Feed.
type FeedStatus struct {
	// Units and Objects count the units and the declared objects.
	Units   int
	Objects int
	// Errors are the current load errors of every unit, sorted.
	Errors []*loader.Error
	// Held is set while an emptying is held.
	Held bool
}

// Status returns what the feed declares now.
func (f *Feed) Status() FeedStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FeedStatus{Units: len(f.decl.files), Objects: len(f.decl.declared), Errors: f.decl.errors(), Held: f.decl.held}
}

// Units returns the names of the units the feed knows, sorted.
func (f *Feed) Units() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedKeys(f.decl.files)
}

// Lookup returns the unit that declares key now, and its object. The
// object is shared: treat it as read-only.
func (f *Feed) Lookup(key reconcile.Key) (unit string, obj v1alpha1.Object, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.decl.declared[key]
	if d == nil {
		return "", nil, false
	}
	return d.File, d.Object, true
}

// KeysIn returns the keys of the objects unit declares (its last good
// version), in document order.
func (f *Feed) KeysIn(unit string) []reconcile.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.decl.keysIn(unit)
}

// Keys returns the keys of kind that are declared now.
func (f *Feed) Keys(kind string) []reconcile.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.decl.keys(kind)
}
