package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/intake"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// Source watches a config directory and hands its files, as units, to a
// Feed that declares their objects to a Sink.
type Source struct {
	opts    Options
	log     *slog.Logger
	synced  chan struct{}
	confirm chan chan bool // ConfirmEmpty requests, into the loop

	// load and watch belong to the loop goroutine; watch is nil until
	// Start (a test may flush by hand without one).
	load  *fileLoader
	watch *watcher
	// files are the files as last handed to feed, which declares their
	// objects: the loader's knowledge of what it has read. They belong to
	// the loop goroutine.
	files map[string]*fileState
	feed  *intake.Feed

	// mu guards root. The loop goroutine is its only writer, and reads it
	// without mu.
	mu   sync.Mutex
	root string // resolved config dir; "" while missing

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
		files:   map[string]*fileState{},
	}
	s.feed = intake.NewFeed(intake.FeedOptions{
		Origin: dirOrigin(opts.Dir), Sink: opts.Sink, Store: opts.Store, Bucket: state.LastGood,
		Recorder: opts.Recorder, Logger: s.log,
	})
	return s
}

// Start watches the directory and declares its objects until ctx ends.
func (s *Source) Start(ctx context.Context) error {
	w, err := newWatcher(s.opts.Dir, s.opts.Clock, s.opts.Debounce, s.opts.Relist, s.log)
	if err != nil {
		return fmt.Errorf("watching %s: %w", s.opts.Dir, err)
	}
	defer w.close()
	restored, err := s.feed.Restore()
	if err != nil {
		return err
	}
	for rel, u := range restored {
		// Restored, not read: the first look loads each one that is
		// still there, and finds gone those that are not.
		s.files[rel] = &fileState{good: u.Objects}
	}
	// Stopped after the loop, so that it writes what the loop left.
	writing, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.feed.Run(writing)
	}()
	defer func() {
		stop()
		<-done
	}()
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
			reply <- s.feed.ConfirmEmpty()
		}
		if s.afterLoop != nil {
			s.afterLoop(slices.Sorted(maps.Keys(s.load.settling)))
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
		if res, err = s.load.relist(ctx, s.files, b.waiting, track); err != nil {
			s.log.Warn("cannot list config dir", "dir", s.opts.Dir, "err", err)
			return
		}
		s.moveRoot(res)
	} else {
		res = s.load.check(s.root, b.paths, s.files)
	}
	for rel, st := range res.restamped {
		if f := s.files[rel]; f != nil {
			f.stamp = st
		}
	}
	s.feed.Declare(s.take(res.changed), true)

	if res.relist {
		// A path turned out to be a symlink: whether it may be followed
		// is the walk's decision.
		s.flush(ctx, batch{relist: true, waiting: b.waiting})
	}
	if s.watch != nil {
		s.watch.settle(slices.Sorted(maps.Keys(s.load.settling)), s.opts.Settle)
	}
}

// take notes the files' fresh loads (nil: gone) as known, and returns
// them as the units they are for the feed. A file that fails to load
// keeps its last good objects, as the feed keeps them declared.
func (s *Source) take(changed map[string]*fileState) map[string]*intake.Unit {
	units := make(map[string]*intake.Unit, len(changed))
	for rel, f := range changed {
		if f == nil {
			delete(s.files, rel)
			units[rel] = nil
			continue
		}
		units[rel] = &intake.Unit{Objects: f.good, Errors: f.errs}
		if old := s.files[rel]; old != nil && len(f.errs) > 0 {
			f.good = old.good
		}
		s.files[rel] = f
	}
	return units
}

// moveRoot takes the root a relist found.
func (s *Source) moveRoot(res *loadResult) {
	if res.missing != nil && (s.root != "" || len(s.files) > 0) {
		cause := res.missing
		if inner := errors.Unwrap(cause); inner != nil {
			cause = inner
		}
		s.log.Warn("config dir missing", "dir", s.opts.Dir, "err", res.missing)
		if r := s.opts.Recorder; r != nil {
			r.Warning(dirOrigin(s.opts.Dir).Key, "ConfigDirMissing", fmt.Sprintf("config dir %s cannot be read: %v", s.opts.Dir, cause))
		}
	}
	s.mu.Lock()
	s.root = res.root
	s.mu.Unlock()
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
func (s *Source) Status() intake.Status {
	fs := s.feed.Status()
	root := s.Root()
	st := intake.Status{
		Dir: s.opts.Dir, Root: root, Missing: root == "",
		Files: fs.Units, Objects: fs.Objects, Held: fs.Held, Errors: fs.Errors,
	}
	if st.Held {
		st.HeldObjects = st.Objects
	}
	return st
}

// Lookup returns the file (inside the config dir) that declares key now,
// and its object. The object is shared: treat it as read-only.
func (s *Source) Lookup(key reconcile.Key) (file string, obj v1alpha1.Object, ok bool) {
	return s.feed.Lookup(key)
}

// KeysIn returns the keys of the objects file declares (its last good
// version), in document order.
func (s *Source) KeysIn(file string) []reconcile.Key { return s.feed.KeysIn(file) }

// Keys returns the keys of kind that are declared now.
func (s *Source) Keys(kind string) []reconcile.Key { return s.feed.Keys(kind) }

// Root returns the directory the config dir leads to now, or "" while it
// is missing.
func (s *Source) Root() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.root
}

func dirName(dir string) string { return filepath.Base(filepath.Clean(dir)) }

// dirOrigin is the origin of a config dir.
func dirOrigin(dir string) intake.Origin {
	return intake.Origin{Key: reconcile.Key{Kind: KindConfigDir, Name: dirName(dir)}, Name: "config dir " + dir}
}
