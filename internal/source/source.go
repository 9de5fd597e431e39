package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// Source watches a config directory and declares its objects to a Sink.
type Source struct {
	opts    Options
	log     *slog.Logger
	synced  chan struct{}
	confirm chan chan bool // ConfirmEmpty requests, into the loop

	// load and watch belong to the loop goroutine; watch is nil until
	// Start (a test may flush by hand without one).
	load  *fileLoader
	watch *watcher
	// lastGood persists the last good objects; nil without a Store.
	lastGood *lastGood

	// mu guards the fields below. The loop goroutine is their only
	// writer, and reads them without it; the accessors read them from
	// other goroutines.
	mu   sync.Mutex
	root string // resolved config dir; "" while missing
	decl *declarations

	// afterLoop, when set (by tests), is called on the loop goroutine
	// after it handled anything, with the files that are settling.
	afterLoop func(settling []string)
}

// New returns a Source; Start runs it.
func New(opts Options) *Source {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 10 * time.Millisecond
	}
	if opts.Settle <= 0 {
		opts.Settle = 200 * time.Millisecond
	}
	if opts.Relist == 0 {
		opts.Relist = 60 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		opts:    opts,
		log:     log.With("component", "source"),
		synced:  make(chan struct{}),
		confirm: make(chan chan bool),
		load:    newFileLoader(opts.Dir),
		decl:    newDeclarations(opts.Dir),
	}
	if opts.Store != nil {
		s.lastGood = newLastGood(opts.Store, s.log)
	}
	return s
}

// Start watches the directory and declares its objects until ctx ends.
func (s *Source) Start(ctx context.Context) error {
	w, err := newWatcher(s.opts.Dir, s.opts.Clock, s.opts.Debounce, s.opts.Relist, s.log)
	if err != nil {
		return fmt.Errorf("watching %s: %w", s.opts.Dir, err)
	}
	defer w.close()
	if err := s.restore(); err != nil {
		return err
	}
	if s.lastGood != nil {
		// Stopped after the loop, so that it writes what the loop left.
		writing, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.lastGood.run(writing)
		}()
		defer func() {
			stop()
			<-done
		}()
	}
	s.watch = w
	s.flush(ctx, batch{relist: true})
	close(s.synced)

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.n.events():
			if !ok || !w.drain(ev) {
				return errors.New("source: watcher closed")
			}
			if w.ready() {
				s.flush(ctx, w.take())
			}
		case err := <-w.n.errors():
			w.lost(err)
		case <-w.tick:
			w.relist(true)
			s.flush(ctx, w.take())
		case <-w.due:
			s.flush(ctx, w.take())
		case reply := <-s.confirm:
			reply <- s.confirmEmpty()
		}
		if s.afterLoop != nil {
			s.afterLoop(sortedKeys(s.load.settling))
		}
	}
}

// flush looks at what b names and declares the outcome.
func (s *Source) flush(ctx context.Context, b batch) {
	var res *loadResult
	if b.relist {
		track := func(string, []string) {}
		if s.watch != nil {
			track = s.watch.track
		}
		var err error
		if res, err = s.load.relist(ctx, s.decl.files, b.waiting, track); err != nil {
			s.log.Warn("cannot list config dir", "dir", s.opts.Dir, "err", err)
			return
		}
		s.moveRoot(res)
	} else {
		res = s.load.check(s.root, b.paths, s.decl.files)
	}
	s.mu.Lock()
	for rel, st := range res.restamped {
		s.decl.restamp(rel, st)
	}
	out := s.decl.apply(res.changed)
	s.mu.Unlock()
	s.carry(out)

	if res.relist {
		// A path turned out to be a symlink: whether it may be followed
		// is the walk's decision.
		s.flush(ctx, batch{relist: true, waiting: b.waiting})
	}
	if s.watch != nil {
		s.watch.settle(sortedKeys(s.load.settling), s.opts.Settle)
	}
}

// moveRoot takes the root a relist found.
func (s *Source) moveRoot(res *loadResult) {
	if res.missing != nil && (s.root != "" || len(s.decl.files) > 0) {
		cause := res.missing
		if inner := errors.Unwrap(cause); inner != nil {
			cause = inner
		}
		s.log.Warn("config dir missing", "dir", s.opts.Dir, "err", res.missing)
		s.record(event{true, s.decl.dirKey, "ConfigDirMissing", fmt.Sprintf("config dir %s cannot be read: %v", s.opts.Dir, cause)})
	}
	s.mu.Lock()
	s.root = res.root
	s.mu.Unlock()
}

// carry out what a change to the declarations asks for: record its
// events, persist its last good objects, and tell the sink.
func (s *Source) carry(out outcome) {
	if out.nowHeld > 0 {
		s.log.Warn("config dir emptied; holding its objects until it comes back or the emptying is confirmed", "dir", s.opts.Dir, "objects", out.nowHeld)
	}
	for _, ev := range out.events {
		s.record(ev)
	}
	if len(out.changes) > 0 {
		s.opts.Sink.Declare(out.changes)
	}
	if s.lastGood != nil {
		s.lastGood.put(out.persist)
	}
}

func (s *Source) confirmEmpty() bool {
	s.mu.Lock()
	out, released := s.decl.confirmEmpty()
	s.mu.Unlock()
	if released {
		s.carry(out)
	}
	return released
}

// restore declares the last good objects persisted by a previous run, so
// that a restart with a broken or missing directory keeps them.
func (s *Source) restore() error {
	if s.opts.Store == nil {
		return nil
	}
	changed := map[string]*fileState{}
	err := s.opts.Store.ForEach(state.LastGood, func(rel string, v []byte) error {
		objs, err := decodeGood(rel, v)
		if err != nil {
			s.log.Warn("dropping unreadable last good state", "file", rel, "err", err)
			return nil
		}
		changed[rel] = &fileState{good: objs}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restoring last good manifests: %w", err)
	}
	s.mu.Lock()
	out := s.decl.apply(changed)
	s.mu.Unlock()
	s.carry(out)
	return nil
}

func (s *Source) record(ev event) {
	switch {
	case s.opts.Recorder == nil:
	case ev.warning:
		s.opts.Recorder.Warning(ev.key, ev.reason, ev.message)
	default:
		s.opts.Recorder.Normal(ev.key, ev.reason, ev.message)
	}
}

// Synced is closed once the first load of the directory has been declared.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// ConfirmEmpty releases a hold: the emptied directory is taken as meant,
// and every object it no longer declares is deleted. It reports whether a
// hold was released.
func (s *Source) ConfirmEmpty(ctx context.Context) (bool, error) {
	reply := make(chan bool, 1)
	select {
	case s.confirm <- reply:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case released := <-reply:
		return released, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Status returns what the source sees now.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Dir: s.opts.Dir, Root: s.root, Missing: s.root == "",
		Files: len(s.decl.files), Objects: len(s.decl.declared), Held: s.decl.held,
		Errors: s.decl.errors(),
	}
	if st.Held {
		st.HeldObjects = st.Objects
	}
	return st
}

// Lookup returns the file (inside the config dir) that declares key now,
// and its object. The object is shared: treat it as read-only.
func (s *Source) Lookup(key reconcile.Key) (file string, obj v1alpha1.Object, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.decl.declared[key]
	if d == nil {
		return "", nil, false
	}
	return d.File, d.Object, true
}

// KeysIn returns the keys of the objects file declares (its last good
// version), in document order.
func (s *Source) KeysIn(file string) []reconcile.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decl.keysIn(file)
}

// Keys returns the keys of kind that are declared now.
func (s *Source) Keys(kind string) []reconcile.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decl.keys(kind)
}

// Root returns the directory the config dir leads to now, or "" while it
// is missing.
func (s *Source) Root() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.root
}

func dirName(dir string) string { return filepath.Base(filepath.Clean(dir)) }
