package source

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// KindConfigDir is the kind of the key that events about the config
// directory itself are recorded against.
const KindConfigDir = "ConfigDir"

// Declaration is the desired state of one object as the config directory
// declares it.
type Declaration struct {
	// Object is the declared object, validated and defaulted. It is shared:
	// treat it as read-only.
	Object v1alpha1.Object
	// File is the declaring file's path inside the config directory.
	File string
	// Line is the line of the object's document in File.
	Line int
	// Invalid holds File's current load errors when File no longer loads;
	// Object is then File's last good version of the object.
	Invalid []*loader.Error
	// Conflicts locates ("FILE:LINE") the other declarations of the same
	// kind and name, which lose to this one; for the Host, also the other
	// Hosts, since at most one may be declared.
	Conflicts []string
}

// Change says that Key is now declared as Declaration, or is no longer
// declared when Declaration is nil.
type Change struct {
	Key         reconcile.Key
	Declaration *Declaration
}

// Sink receives declarations.
type Sink interface {
	// Declare receives the changes of one load, sorted by key. Calls come
	// from one goroutine at a time, in order.
	Declare(changes []Change)
}

// Store keeps the last good objects across restarts. *state.DB is one.
type Store interface {
	ForEach(b state.Bucket, fn func(key string, value []byte) error) error
	Write(b state.Bucket, puts map[string][]byte) error
}

// Recorder records events about objects.
type Recorder interface {
	Normal(obj reconcile.Key, reason, message string)
	Warning(obj reconcile.Key, reason, message string)
}

// Options configure a Source.
type Options struct {
	// Dir is the config directory. It may be a symlink, may not exist yet,
	// and may be swapped for another directory while watched.
	Dir string
	// Sink receives the declarations. Required.
	Sink Sink
	// Store persists last good objects. Optional.
	Store Store
	// Recorder records events. Optional.
	Recorder Recorder
	// Logger logs. Optional.
	Logger *slog.Logger
	// Clock drives the debounce and relist timers. Default: the real clock.
	Clock clock.WithTicker
	// Debounce is how long the directory must be quiet after an event
	// before changes are loaded. Default 10ms.
	Debounce time.Duration
	// Settle is how long a file that was emptied in place is given to be
	// written again before its emptiness is believed. Default 200ms.
	Settle time.Duration
	// Relist is the interval of the stat-level relist that catches what
	// events missed. Default 60s; negative disables it.
	Relist time.Duration
}

// Status summarizes what the source sees.
type Status struct {
	// Dir is the config directory as configured; Root is where it leads.
	Dir  string `json:"dir"`
	Root string `json:"root,omitempty"`
	// Missing is set while the directory does not exist.
	Missing bool `json:"missing,omitempty"`
	// Files and Objects count the manifest files and declared objects.
	Files   int `json:"files"`
	Objects int `json:"objects"`
	// Errors are the current load errors of every file, sorted.
	Errors []*loader.Error `json:"errors,omitempty"`
	// Held is set while an emptied directory is held: nothing was deleted.
	Held bool `json:"held,omitempty"`
	// HeldObjects is how many objects the hold keeps declared.
	HeldObjects int `json:"heldObjects,omitempty"`
}

// Source watches a config directory and declares its objects to a Sink.
type Source struct {
	opts   Options
	log    *slog.Logger
	dirKey reconcile.Key
	synced chan struct{}
	// confirm carries ConfirmEmpty requests into the loop.
	confirm chan chan bool

	// mu guards the fields below. The loop goroutine is the only writer;
	// Status reads them from other goroutines.
	mu       sync.Mutex
	root     string // resolved config dir; "" while missing
	files    map[string]*fileState
	index    map[reconcile.Key][]declRef // every declaration of a key, sorted
	hosts    map[reconcile.Key]bool      // the keys of kind Host in index
	desired  map[reconcile.Key]*Declaration
	declared map[reconcile.Key]*Declaration // what the sink was told
	held     bool
	watched  map[string]bool // directories under watch
	pending  map[string]bool // files that changed since the last flush
	relist   bool            // the next flush relists the whole tree
	settling map[string]bool // emptied files given time to be written again

	// flushed, when set (by tests), receives a value after every flush.
	flushed chan struct{}
}

type fileState struct {
	stamp stamp
	sum   [sha256.Size]byte
	good  []loader.Object
	errs  []*loader.Error
}

type declRef struct {
	file string
	obj  loader.Object
}

// stamp identifies a file's content cheaply: if none of these changed, the
// content did not either.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
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
	return &Source{
		opts:     opts,
		log:      log.With("component", "source"),
		dirKey:   reconcile.Key{Kind: KindConfigDir, Name: filepath.Base(filepath.Clean(opts.Dir))},
		synced:   make(chan struct{}),
		confirm:  make(chan chan bool),
		files:    map[string]*fileState{},
		index:    map[reconcile.Key][]declRef{},
		hosts:    map[reconcile.Key]bool{},
		desired:  map[reconcile.Key]*Declaration{},
		declared: map[reconcile.Key]*Declaration{},
		watched:  map[string]bool{},
		pending:  map[string]bool{},
		settling: map[string]bool{},
	}
}

// Synced is closed once the first load of the directory has been declared.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// Status returns what the source sees now.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Dir: s.opts.Dir, Root: s.root, Missing: s.root == "", Files: len(s.files), Objects: len(s.declared), Held: s.held}
	if s.held {
		st.HeldObjects = len(s.declared)
	}
	for _, f := range s.files {
		st.Errors = append(st.Errors, f.errs...)
	}
	sortErrors(st.Errors)
	return st
}

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

// Start watches the directory and declares its objects until ctx ends.
func (s *Source) Start(ctx context.Context) error {
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return fmt.Errorf("watching %s: %w", s.opts.Dir, err)
	}
	defer w.Close()

	if err := s.restore(); err != nil {
		return err
	}
	// The parent is watched so that the directory being deleted, created
	// or swapped for a symlink elsewhere is seen.
	parent := filepath.Dir(filepath.Clean(s.opts.Dir))
	if err := w.Add(parent); err != nil {
		s.log.Warn("cannot watch the config dir's parent; swaps are seen at relist", "dir", parent, "err", err)
	}
	s.relist = true
	s.flush(ctx, w)
	close(s.synced)

	var relistC <-chan time.Time
	if s.opts.Relist > 0 {
		t := s.opts.Clock.NewTicker(s.opts.Relist)
		defer t.Stop()
		relistC = t.C()
	}
	var debounce clock.Timer
	var debounceC <-chan time.Time
	arm := func(d time.Duration) {
		if debounce == nil {
			debounce = s.opts.Clock.NewTimer(d)
		} else {
			debounce.Stop()
			debounce.Reset(d)
		}
		debounceC = debounce.C()
	}
	defer func() {
		if debounce != nil {
			debounce.Stop()
		}
	}()

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("source: watcher closed")
			}
			s.note(ev, parent)
			arm(s.opts.Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("source: watcher closed")
			}
			// An overflow lost events: only a relist can tell what changed.
			s.log.Warn("watch error; relisting", "err", err)
			s.relist = true
			arm(s.opts.Debounce)
		case <-relistC:
			s.relist = true
			s.flush(ctx, w)
		case <-debounceC:
			debounceC = nil
			if again := s.flush(ctx, w); again {
				arm(s.opts.Settle)
			}
		case reply := <-s.confirm:
			reply <- s.confirmEmpty()
		}
	}
}

// note records what an event may have changed.
func (s *Source) note(ev fsnotify.Event, parent string) {
	dir, base := filepath.Split(ev.Name)
	dir = filepath.Clean(dir)
	if dir == parent {
		// Something happened next to the config dir; only the dir itself
		// matters, and anything about it means relist.
		if base == filepath.Base(filepath.Clean(s.opts.Dir)) {
			s.relist = true
		}
		return
	}
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	if root == "" {
		s.relist = true
		return
	}
	rel, err := filepath.Rel(root, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		s.relist = true
		return
	}
	if strings.HasPrefix(base, ".") || !loader.Matches(base) {
		// A dot entry (a ConfigMap ..data swap), a new or removed
		// directory, or a symlink: the tree's shape may have changed.
		if strings.HasPrefix(base, ".") || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			s.relist = true
		}
		return
	}
	s.pending[rel] = true
}

// flush loads what changed and declares the outcome. It reports whether a
// file is settling and flush should run again after Settle.
func (s *Source) flush(ctx context.Context, w *fsnotify.Watcher) bool {
	changed := map[string]*fileState{} // nil: the file is gone
	s.mu.Lock()
	for rel := range s.settling {
		s.pending[rel] = true
	}
	s.mu.Unlock()
	if s.relist {
		s.relist = false
		s.relistInto(ctx, w, changed)
	} else {
		s.mu.Lock()
		root := s.root
		s.mu.Unlock()
		for rel := range s.pending {
			s.checkFile(root, rel, changed)
		}
	}
	clear(s.pending)
	s.apply(changed)
	if s.flushed != nil {
		select {
		case s.flushed <- struct{}{}:
		default:
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.settling) > 0
}

// relistInto walks the whole tree, stat-level, and loads what differs.
func (s *Source) relistInto(ctx context.Context, w *fsnotify.Watcher, changed map[string]*fileState) {
	root, err := filepath.EvalSymlinks(s.opts.Dir)
	if err == nil {
		if fi, serr := os.Stat(root); serr != nil || !fi.IsDir() {
			err = fmt.Errorf("not a directory")
		}
	}
	s.mu.Lock()
	oldRoot := s.root
	if err != nil {
		s.root = ""
	} else {
		s.root = root
	}
	s.mu.Unlock()
	if err != nil {
		if oldRoot != "" || len(s.files) > 0 {
			s.log.Warn("config dir missing", "dir", s.opts.Dir, "err", err)
			s.record(true, s.dirKey, "ConfigDirMissing", fmt.Sprintf("config dir %s cannot be read: %v", s.opts.Dir, errors.Unwrap(err)))
		}
		s.unwatchAll(w)
		for rel := range s.files {
			changed[rel] = nil
		}
		return
	}
	if root != oldRoot {
		s.unwatchAll(w)
	}
	walk, err := loader.Walk(ctx, root)
	if err != nil {
		s.log.Warn("cannot list config dir", "dir", root, "err", err)
		return
	}
	dirs := map[string]bool{}
	for _, d := range walk.Dirs {
		dirs[d] = true
		if w != nil && !s.watched[d] {
			if err := w.Add(d); err != nil {
				s.log.Warn("cannot watch directory", "dir", d, "err", err)
				continue
			}
			s.watched[d] = true
		}
	}
	for d := range s.watched {
		if !dirs[d] {
			w.Remove(d)
			delete(s.watched, d)
		}
	}

	seen := map[string]bool{}
	var toLoad []loader.Entry
	for _, e := range walk.Files {
		seen[e.Rel] = true
		st, ok := statFile(e.Path)
		if !ok {
			changed[e.Rel] = nil
			continue
		}
		if old := s.files[e.Rel]; old != nil && old.stamp == st && !s.isSettling(e.Rel) {
			continue
		}
		toLoad = append(toLoad, e)
	}
	// Walk errors (a symlink out of the dir, a loop) belong to a path
	// that loads nothing.
	walkErrs := map[string][]*loader.Error{}
	for _, e := range walk.Errors {
		rel := e.File
		walkErrs[rel] = append(walkErrs[rel], e)
	}
	for rel, errs := range walkErrs {
		seen[rel] = true
		old := s.files[rel]
		if old == nil || !reflect.DeepEqual(old.errs, errs) {
			fs := &fileState{errs: errs}
			if old != nil {
				fs.good = old.good
			}
			changed[rel] = fs
		}
	}
	for rel := range s.files {
		if !seen[rel] {
			changed[rel] = nil
		}
	}
	for _, fs := range loadAll(toLoad) {
		s.accept(fs.rel, fs.state, fs.err, changed)
	}
}

// checkFile reloads one file named by an event.
func (s *Source) checkFile(root, rel string, changed map[string]*fileState) {
	if root == "" {
		return
	}
	path := filepath.Join(root, rel)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if s.files[rel] != nil {
			changed[rel] = nil
		}
		return
	case err != nil:
		return
	case fi.Mode()&fs.ModeSymlink != 0 || !fi.Mode().IsRegular():
		// Whether a symlink may be followed is the walk's decision.
		s.relist = true
		return
	}
	st, ok := statFile(path)
	if !ok {
		return
	}
	if old := s.files[rel]; old != nil && old.stamp == st && !s.isSettling(rel) {
		return
	}
	fs, err := loadOne(loader.Entry{Rel: rel, Path: path}, st)
	s.accept(rel, fs, err, changed)
}

// accept takes a file's fresh load into changed, keeping its last good
// objects when it failed, and giving a file emptied in place time to be
// written again.
func (s *Source) accept(rel string, fresh *fileState, readErr error, changed map[string]*fileState) {
	old := s.files[rel]
	if readErr != nil {
		if errors.Is(readErr, fs.ErrNotExist) {
			if old != nil {
				changed[rel] = nil
			}
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fresh.stamp.size == 0 && old != nil && len(old.good) > 0 && !s.settling[rel] {
		// An in-place save truncates before it writes: do not believe an
		// empty file until it has stayed empty for Settle.
		s.settling[rel] = true
		return
	}
	delete(s.settling, rel)
	if old != nil && old.sum == fresh.sum && len(old.errs) == 0 && len(fresh.errs) == 0 {
		old.stamp = fresh.stamp
		return
	}
	if len(fresh.errs) > 0 && old != nil {
		fresh.good = old.good
	}
	changed[rel] = fresh
}

// apply installs changed files and declares what changed as a result.
func (s *Source) apply(changed map[string]*fileState) {
	if len(changed) == 0 && !s.held {
		return
	}
	touched := map[reconcile.Key]bool{}
	persist := map[string][]byte{}
	hostsTouched := false
	var fileEvents []func()
	s.mu.Lock()
	for rel, fs := range changed {
		old := s.files[rel]
		if old != nil {
			for _, o := range old.good {
				k := keyOf(o)
				touched[k] = true
				s.index[k] = slices.DeleteFunc(s.index[k], func(d declRef) bool { return d.file == rel })
				if len(s.index[k]) == 0 {
					delete(s.index, k)
					delete(s.hosts, k)
				}
			}
		}
		if fs == nil {
			delete(s.files, rel)
			if old != nil && len(old.good) > 0 {
				persist[rel] = nil
			}
			continue
		}
		s.files[rel] = fs
		for _, o := range fs.good {
			k := keyOf(o)
			touched[k] = true
			s.index[k] = append(s.index[k], declRef{file: rel, obj: o})
			sort.SliceStable(s.index[k], func(i, j int) bool { return declLess(s.index[k][i], s.index[k][j]) })
			if k.Kind == v1alpha1.KindHost {
				s.hosts[k] = true
			}
		}
		if len(fs.errs) == 0 {
			persist[rel] = encodeGood(fs.good)
		}
		fileEvents = append(fileEvents, func() { s.recordFile(rel, old, fs) })
	}
	for k := range touched {
		if k.Kind == v1alpha1.KindHost {
			hostsTouched = true
		}
	}
	if hostsTouched {
		for k := range s.hosts {
			touched[k] = true
		}
	}
	for k := range touched {
		if d := s.declare(k); d != nil {
			s.desired[k] = d
		} else {
			delete(s.desired, k)
		}
	}
	s.mu.Unlock()

	for _, ev := range fileEvents {
		ev()
	}
	if s.opts.Store != nil && len(persist) > 0 {
		if err := s.opts.Store.Write(state.LastGood, persist); err != nil {
			s.log.Error("persisting last good manifests", "err", err)
		}
	}
	s.publish(touched)
}

// declare computes the declaration of k from the index. The caller holds
// s.mu.
func (s *Source) declare(k reconcile.Key) *Declaration {
	refs := s.index[k]
	if len(refs) == 0 {
		return nil
	}
	win := refs[0]
	d := &Declaration{Object: win.obj.Object, File: win.file, Line: win.obj.Line, Invalid: s.files[win.file].errs}
	for _, r := range refs[1:] {
		d.Conflicts = append(d.Conflicts, fmt.Sprintf("%s:%d", r.file, r.obj.Line))
	}
	if k.Kind == v1alpha1.KindHost {
		// At most one Host: the first declaration in path order wins.
		for hk := range s.hosts {
			hrefs := s.index[hk]
			if hk == k {
				continue
			}
			if declLess(hrefs[0], win) {
				return nil
			}
			d.Conflicts = append(d.Conflicts, fmt.Sprintf("%s:%d", hrefs[0].file, hrefs[0].obj.Line))
		}
		sort.Strings(d.Conflicts)
	}
	return d
}

// publish tells the sink what changed among keys, unless an emptied
// directory must be held.
func (s *Source) publish(keys map[reconcile.Key]bool) {
	s.mu.Lock()
	emptied := len(s.desired) == 0 && len(s.declared) > 0
	if emptied {
		if !s.held {
			s.held = true
			n := len(s.declared)
			s.mu.Unlock()
			s.log.Warn("config dir emptied; holding its objects until it comes back or the emptying is confirmed", "dir", s.opts.Dir, "objects", n)
			s.record(true, s.dirKey, "EmptiedHeld", fmt.Sprintf(
				"config dir %s went from %d objects to none; nothing was deleted. Restore it, or run marshalctl apply --allow-empty to confirm", s.opts.Dir, n))
			return
		}
		s.mu.Unlock()
		return
	}
	if s.held {
		// Released: everything may differ from what the sink was told.
		s.held = false
		for k := range s.declared {
			keys[k] = true
		}
		for k := range s.desired {
			keys[k] = true
		}
		s.mu.Unlock()
		s.record(false, s.dirKey, "HoldReleased", fmt.Sprintf("config dir %s declares objects again", s.opts.Dir))
		s.mu.Lock()
	}
	var out []Change
	for k := range keys {
		d := s.desired[k]
		if old := s.declared[k]; declEqual(old, d) {
			continue
		}
		if d == nil {
			delete(s.declared, k)
		} else {
			s.declared[k] = d
		}
		out = append(out, Change{k, d})
	}
	s.mu.Unlock()
	if len(out) == 0 {
		return
	}
	slices.SortFunc(out, func(a, b Change) int { return reconcile.CompareKeys(a.Key, b.Key) })
	for _, c := range out {
		if d := c.Declaration; d != nil && len(d.Conflicts) > 0 {
			s.record(true, c.Key, "Conflict", fmt.Sprintf("declared in %s:%d (wins) and also in %s", d.File, d.Line, strings.Join(d.Conflicts, ", ")))
		}
	}
	s.opts.Sink.Declare(out)
}

func (s *Source) confirmEmpty() bool {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if !held {
		return false
	}
	s.mu.Lock()
	keys := map[reconcile.Key]bool{}
	for k := range s.declared {
		keys[k] = true
	}
	s.held = false
	var out []Change
	for k := range keys {
		if s.desired[k] == nil {
			delete(s.declared, k)
			out = append(out, Change{Key: k})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Change) int { return reconcile.CompareKeys(a.Key, b.Key) })
	s.record(false, s.dirKey, "EmptyConfirmed", fmt.Sprintf("emptying of config dir %s confirmed; %d objects deleted", s.opts.Dir, len(out)))
	s.opts.Sink.Declare(out)
	return true
}

func (s *Source) unwatchAll(w *fsnotify.Watcher) {
	if w == nil {
		return
	}
	for d := range s.watched {
		w.Remove(d)
	}
	clear(s.watched)
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
	s.apply(changed)
	return nil
}

func (s *Source) record(warning bool, k reconcile.Key, reason, msg string) {
	if s.opts.Recorder == nil {
		return
	}
	if warning {
		s.opts.Recorder.Warning(k, reason, msg)
	} else {
		s.opts.Recorder.Normal(k, reason, msg)
	}
}

// recordFile records an event when a file that declares no object starts
// or stops failing. The objects of a failing file get an Invalid condition
// from their controllers, with its own event; a file with none has only
// the config dir to be reported against.
func (s *Source) recordFile(rel string, old, fresh *fileState) {
	if len(fresh.good) > 0 {
		return
	}
	wasBad := old != nil && len(old.errs) > 0
	switch {
	case len(fresh.errs) > 0:
		msg := fresh.errs[0].Error()
		if n := len(fresh.errs) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more)", n)
		}
		s.record(true, s.dirKey, "Invalid", msg)
	case wasBad:
		s.record(false, s.dirKey, "Valid", rel+" loads again")
	}
}

// loadAll loads entries on every core.
func loadAll(entries []loader.Entry) []loaded {
	out := make([]loaded, len(entries))
	var wg sync.WaitGroup
	next := make(chan int)
	workers := min(len(entries), max(1, runtimeProcs()))
	for range workers {
		wg.Go(func() {
			for i := range next {
				e := entries[i]
				st, _ := statFile(e.Path)
				fs, err := loadOne(e, st)
				out[i] = loaded{rel: e.Rel, state: fs, err: err}
			}
		})
	}
	for i := range entries {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

type loaded struct {
	rel   string
	state *fileState
	err   error
}

// loadOne reads and loads one file, naming it by its path inside the
// config dir.
func loadOne(e loader.Entry, st stamp) (*fileState, error) {
	data, rerr := loader.ReadFile(e.Path, e.Rel)
	if rerr != nil {
		if errors.Is(rerr, fs.ErrNotExist) {
			return nil, fs.ErrNotExist
		}
		return &fileState{stamp: st, errs: []*loader.Error{rerr}}, nil
	}
	lf := loader.LoadBytes(e.Rel, data)
	fs := &fileState{stamp: st, sum: sha256.Sum256(data), errs: lf.Errors}
	if len(lf.Errors) == 0 {
		fs.good = lf.Objects
	}
	return fs, nil
}

func keyOf(o loader.Object) reconcile.Key {
	return reconcile.Key{Kind: o.GetTypeMeta().Kind, Name: o.GetObjectMeta().Name}
}

func declLess(a, b declRef) bool {
	if a.file != b.file {
		return a.file < b.file
	}
	return a.obj.Line < b.obj.Line
}

func declEqual(a, b *Declaration) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.File == b.File && a.Line == b.Line &&
		reflect.DeepEqual(a.Invalid, b.Invalid) && slices.Equal(a.Conflicts, b.Conflicts) &&
		reflect.DeepEqual(a.Object, b.Object)
}

func sortErrors(errs []*loader.Error) {
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].File != errs[j].File {
			return errs[i].File < errs[j].File
		}
		return errs[i].Line < errs[j].Line
	})
}

// persisted is the stored form of one last good object.
type persisted struct {
	Line   int             `json:"line"`
	Kind   string          `json:"kind"`
	Object json.RawMessage `json:"object"`
}

func encodeGood(objs []loader.Object) []byte {
	ps := make([]persisted, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			continue
		}
		ps = append(ps, persisted{Line: o.Line, Kind: o.GetTypeMeta().Kind, Object: raw})
	}
	b, _ := json.Marshal(ps)
	return b
}

func decodeGood(rel string, data []byte) ([]loader.Object, error) {
	var ps []persisted
	if err := json.Unmarshal(data, &ps); err != nil {
		return nil, err
	}
	objs := make([]loader.Object, 0, len(ps))
	for _, p := range ps {
		obj := v1alpha1.New(p.Kind)
		if obj == nil {
			return nil, fmt.Errorf("unknown kind %q", p.Kind)
		}
		if err := json.Unmarshal(p.Object, obj); err != nil {
			return nil, err
		}
		objs = append(objs, loader.Object{Object: obj, File: rel, Line: p.Line})
	}
	return objs, nil
}

// Lookup returns the file (inside the config dir) that declares key now,
// and its object. The object is shared: treat it as read-only.
func (s *Source) Lookup(key reconcile.Key) (file string, obj v1alpha1.Object, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.declared[key]
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
	f := s.files[file]
	if f == nil {
		return nil
	}
	keys := make([]reconcile.Key, len(f.good))
	for i, o := range f.good {
		keys[i] = keyOf(o)
	}
	return keys
}

// Root returns the directory the config dir leads to now, or "" while it
// is missing.
func (s *Source) Root() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.root
}

// isSettling reports whether rel was emptied in place and is given time
// to be written again. For tests.
func (s *Source) isSettling(rel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settling[rel]
}

// Keys returns the keys of kind that are declared now.
func (s *Source) Keys(kind string) []reconcile.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []reconcile.Key
	for k := range s.declared {
		if k.Kind == kind {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, reconcile.CompareKeys)
	return keys
}
