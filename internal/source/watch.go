package source

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/loader"
)

// watcher turns fsnotify events into batches of changed paths: which
// files to look at again, or that the whole tree must be relisted. It
// watches every directory of the tree and the config dir's parent, so that
// the directory itself being deleted, created or swapped is seen. Its
// methods are called from the Source's loop goroutine only.
type watcher struct {
	dir      string // the config dir as configured
	parent   string // the directory the config dir is an entry of
	log      *slog.Logger
	clock    clock.WithTicker
	debounce time.Duration
	fsw      *fsnotify.Watcher

	root    string          // the tree the watches are on; "" while missing
	watched map[string]bool // directories under watch
	pending map[string]bool // files that changed since the last batch
	relist  bool            // the next batch relists the whole tree

	timer  clock.Timer
	due    <-chan time.Time // fires when a batch is due; nil while none is
	ticker clock.Ticker
	tick   <-chan time.Time // the periodic relist; nil when disabled
}

// batch is what a look at the tree must cover.
type batch struct {
	relist bool
	paths  []string // inside the root, sorted
}

func newWatcher(dir string, clk clock.WithTicker, debounce, relist time.Duration, log *slog.Logger) (*watcher, error) {
	fsw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	w := &watcher{
		dir: dir, parent: filepath.Dir(filepath.Clean(dir)), log: log, clock: clk,
		debounce: debounce, fsw: fsw, watched: map[string]bool{}, pending: map[string]bool{},
	}
	if err := fsw.Add(w.parent); err != nil {
		log.Warn("cannot watch the config dir's parent; swaps are seen at relist", "dir", w.parent, "err", err)
	}
	if relist > 0 {
		w.ticker = clk.NewTicker(relist)
		w.tick = w.ticker.C()
	}
	return w, nil
}

func (w *watcher) close() {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.ticker != nil {
		w.ticker.Stop()
	}
	w.fsw.Close()
}

// note records what an event may have changed.
func (w *watcher) note(ev fsnotify.Event) {
	defer w.after(w.debounce)
	dir, base := filepath.Split(ev.Name)
	if filepath.Clean(dir) == w.parent {
		// Something happened next to the config dir; only the dir itself
		// matters, and anything about it means relist.
		if base == dirName(w.dir) {
			w.relist = true
		}
		return
	}
	if w.root == "" {
		w.relist = true
		return
	}
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		w.relist = true
		return
	}
	if strings.HasPrefix(base, ".") || !loader.Matches(base) {
		// A dot entry (a ConfigMap ..data swap), a new or removed
		// directory, or a symlink: the tree's shape may have changed.
		if strings.HasPrefix(base, ".") || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			w.relist = true
		}
		return
	}
	w.pending[rel] = true
}

// lost notes that events were lost (an overflow): only a relist can tell
// what changed.
func (w *watcher) lost(err error) {
	w.log.Warn("watch error; relisting", "err", err)
	w.relistSoon()
}

// relistSoon asks for a relist in the next batch.
func (w *watcher) relistSoon() {
	w.relist = true
	w.after(w.debounce)
}

// after makes a batch due in d, in place of any due before.
func (w *watcher) after(d time.Duration) {
	if w.timer == nil {
		w.timer = w.clock.NewTimer(d)
	} else {
		w.timer.Stop()
		w.timer.Reset(d)
	}
	w.due = w.timer.C()
}

// take returns the batch due and starts the next.
func (w *watcher) take() batch {
	b := batch{relist: w.relist}
	if !b.relist {
		for rel := range w.pending {
			b.paths = append(b.paths, rel)
		}
		slices.Sort(b.paths)
	}
	clear(w.pending)
	w.relist = false
	w.due = nil
	return b
}

// track watches exactly dirs, the directories of the tree at root ("" when
// the config dir is missing: nothing under it is watched).
func (w *watcher) track(root string, dirs []string) {
	if root != w.root {
		for d := range w.watched {
			w.fsw.Remove(d)
		}
		clear(w.watched)
		w.root = root
	}
	keep := map[string]bool{}
	for _, d := range dirs {
		keep[d] = true
		if w.watched[d] {
			continue
		}
		if err := w.fsw.Add(d); err != nil {
			w.log.Warn("cannot watch directory", "dir", d, "err", err)
			continue
		}
		w.watched[d] = true
	}
	for d := range w.watched {
		if !keep[d] {
			w.fsw.Remove(d)
			delete(w.watched, d)
		}
	}
}
