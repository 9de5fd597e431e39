package pathwatch

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// Watcher watches paths on behalf of owners. Its methods are safe for
// concurrent use.
type Watcher struct {
	notify func(owner string)
	log    *slog.Logger
	w      *fsnotify.Watcher

	// mu guards the fields below.
	mu     sync.Mutex
	owners map[string]string          // owner → path
	paths  map[string]map[string]bool // path → owners
	armed  map[string]string          // path → the directory watched for it
	dirs   map[string]map[string]bool // watched directory → paths
}

// New returns a Watcher that calls notify with the owner of every path
// that may have changed. notify runs on the watcher's goroutine and must
// be quick (enqueue a key).
func New(notify func(owner string), log *slog.Logger) (*Watcher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fw, err := fsnotify.NewBufferedWatcher(256)
	if err != nil {
		return nil, err
	}
	return &Watcher{
		notify: notify, log: log, w: fw,
		owners: map[string]string{}, paths: map[string]map[string]bool{},
		armed: map[string]string{}, dirs: map[string]map[string]bool{},
	}, nil
}

// Set makes owner's path path (cleaned, absolute), replacing the path it
// had; "" stops watching for owner.
func (w *Watcher) Set(owner, path string) {
	if path != "" {
		path = filepath.Clean(path)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.owners[owner]
	if had && old == path {
		return
	}
	if had {
		delete(w.paths[old], owner)
		if len(w.paths[old]) == 0 {
			delete(w.paths, old)
			w.disarmLocked(old)
		}
		delete(w.owners, owner)
	}
	if path == "" || !filepath.IsAbs(path) {
		return
	}
	w.owners[owner] = path
	if w.paths[path] == nil {
		w.paths[path] = map[string]bool{}
		w.armLocked(path)
	}
	w.paths[path][owner] = true
}

// Start delivers notifications until ctx ends, then releases the
// watches.
func (w *Watcher) Start(ctx context.Context) error {
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.w.Events:
			if !ok {
				return errors.New("pathwatch: watcher closed")
			}
			w.handle(ev)
		case err, ok := <-w.w.Errors:
			if !ok {
				return errors.New("pathwatch: watcher closed")
			}
			// Lost events: any path may have changed.
			w.log.Warn("path watch error; rechecking every path", "err", err)
			w.all()
		}
	}
}

// Close releases the watches, for a Watcher that is never started; Start
// releases them too. Close may be called more than once, and a Start
// after it returns at once with an error.
func (w *Watcher) Close() error { return w.w.Close() }

// handle notifies the owners of the paths an event may concern: the path
// named, and the paths below it (a directory above a root was removed or
// created).
func (w *Watcher) handle(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	w.mu.Lock()
	var hit []string
	for _, dir := range []string{filepath.Dir(name), name} {
		for p := range w.dirs[dir] {
			if p == name || strings.HasPrefix(p, name+string(filepath.Separator)) || dir == name {
				hit = append(hit, p)
			}
		}
	}
	owners := w.rearmLocked(hit)
	w.mu.Unlock()
	for _, o := range owners {
		w.notify(o)
	}
}

// all notifies every owner and re-arms every path.
func (w *Watcher) all() {
	w.mu.Lock()
	paths := make([]string, 0, len(w.paths))
	for p := range w.paths {
		paths = append(paths, p)
	}
	owners := w.rearmLocked(paths)
	w.mu.Unlock()
	for _, o := range owners {
		w.notify(o)
	}
}

// rearmLocked moves the watch of each path to its nearest existing
// directory and returns their owners, sorted.
func (w *Watcher) rearmLocked(paths []string) []string {
	seen := map[string]bool{}
	var owners []string
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		w.disarmLocked(p)
		w.armLocked(p)
		for o := range w.paths[p] {
			owners = append(owners, o)
		}
	}
	sort.Strings(owners)
	return owners
}

// armLocked watches the nearest existing directory above path.
func (w *Watcher) armLocked(path string) {
	dir := filepath.Dir(path)
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return
		}
		dir = up
	}
	if w.dirs[dir] == nil {
		if err := w.w.Add(dir); err != nil {
			w.log.Warn("cannot watch directory; changes to paths below it are seen on the next check", "dir", dir, "err", err)
			return
		}
		w.dirs[dir] = map[string]bool{}
	}
	w.dirs[dir][path] = true
	w.armed[path] = dir
}

// disarmLocked stops watching for path, and the directory when no other
// path needs it.
func (w *Watcher) disarmLocked(path string) {
	dir, ok := w.armed[path]
	if !ok {
		return
	}
	delete(w.armed, path)
	delete(w.dirs[dir], path)
	if len(w.dirs[dir]) == 0 {
		delete(w.dirs, dir)
		// The watch may already be gone with its directory.
		w.w.Remove(dir)
	}
}

// Watched returns the directories under watch, sorted. For tests.
func (w *Watcher) Watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.dirs))
	for d := range w.dirs {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
