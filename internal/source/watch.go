package source

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/loader"
)

// watcher turns events into batches of paths to look at. A complete
// change is due at once: a file renamed into the directory, a writer
// closing its file, a symlink or directory swapped in. A change that may
// still be under way waits until its path has been quiet for the quiet
// period: a file written in place and not closed yet, a file removed (an
// editor may be moving it aside to write a new one). A change to the
// tree's shape asks for a relist. It watches every directory of the tree
// and the config dir's parent, so that the directory itself being deleted,
// created or swapped is seen. Its methods are called from the Source's
// loop goroutine only.
type watcher struct {
	dir    string // the config dir as configured
	parent string // the directory the config dir is an entry of
	log    *slog.Logger
	clock  clock.WithTicker
	quiet  time.Duration
	n      notifier

	root    string          // the tree the watches are on; "" while missing
	watched map[string]bool // directories under watch
	// plain are files seen created that neither hold manifests nor
	// shape the tree (an editor's probe or backup, sed's temporary):
	// their removal changes nothing.
	plain map[string]bool

	now       map[string]bool      // paths due at once
	later     map[string]time.Time // paths due when quiet, and when
	relistNow bool
	relistAt  time.Time // a relist due when quiet; zero when none

	timer  clock.Timer
	due    <-chan time.Time // fires when something in later is due
	dueAt  time.Time
	ticker clock.Ticker
	tick   <-chan time.Time // the periodic relist; nil when disabled
}

// batch is what a look at the tree must cover.
type batch struct {
	relist bool
	paths  []string // inside the root, sorted
	// waiting are paths still changing: a relist leaves them as they
	// were, for their own look when they are due.
	waiting map[string]bool
}

func newWatcher(dir string, clk clock.WithTicker, quiet, relist time.Duration, log *slog.Logger) (*watcher, error) {
	n, err := newNotifier(4096)
	if err != nil {
		return nil, err
	}
	w := &watcher{
		dir: dir, parent: filepath.Dir(filepath.Clean(dir)), log: log, clock: clk, quiet: quiet, n: n,
		watched: map[string]bool{}, plain: map[string]bool{}, now: map[string]bool{}, later: map[string]time.Time{},
	}
	if err := n.add(w.parent); err != nil {
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
	w.n.close()
}

// note records what an event may have changed.
func (w *watcher) note(ev fsEvent) {
	dir, base := filepath.Split(ev.path)
	if filepath.Clean(dir) == w.parent {
		// Next to the config dir only the dir itself matters.
		if base == dirName(w.dir) {
			w.relist(ev.op.has(opMovedIn))
		}
		return
	}
	rel, err := filepath.Rel(w.root, ev.path)
	if w.root == "" || err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		// The root itself, or a tree the watches are leaving.
		w.relist(false)
		return
	}
	switch {
	case ev.op.has(opIsDir):
		if ev.op.has(opCreate | opMovedIn | opRemove | opMovedOut) {
			w.relist(ev.op.has(opMovedIn))
		}
	case strings.HasPrefix(base, ".") || !loader.Matches(base):
		w.other(rel, ev)
	case ev.op.has(opCloseWrite | opMovedIn):
		// Complete: its writer closed it, or it was renamed in whole.
		delete(w.later, rel)
		w.now[rel] = true
	case ev.op.has(opCreate | opWrite | opRemove | opMovedOut):
		// Under way: written in place, or moved aside by an editor that
		// writes the new version next. Not due at once even if it was a
		// moment ago.
		delete(w.now, rel)
		w.wait(rel)
	case ev.op.has(opChmod):
		// Looked at when quiet, and never later than a look due at once:
		// an editor sets modes after it closed the file.
		w.wait(rel)
	}
}

// other notes an event about a name that is not a manifest's. It matters
// only if the name is, or was, a symlink or a directory: a symlink swapped
// in (a ConfigMap's ..data) changes where visible names lead.
func (w *watcher) other(rel string, ev fsEvent) {
	switch {
	case ev.op.has(opCreate | opMovedIn):
		fi, err := os.Lstat(filepath.Join(w.root, rel))
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode().IsRegular() {
			w.plain[rel] = true
			return
		}
		w.relist(true)
	case ev.op.has(opRemove | opMovedOut):
		if w.plain[rel] {
			delete(w.plain, rel)
			return
		}
		w.relist(false)
	}
}

// wait makes rel due when it has been quiet for the quiet period, unless
// it is due at once.
func (w *watcher) wait(rel string) {
	if !w.now[rel] {
		w.dueIn(rel, w.quiet)
	}
}

// settle gives files emptied in place d to be written again: each is
// looked at again in d, unless something else is due for it first.
func (w *watcher) settle(rels []string, d time.Duration) {
	for _, rel := range rels {
		if _, waiting := w.later[rel]; !waiting && !w.now[rel] {
			w.dueIn(rel, d)
		}
	}
}

func (w *watcher) dueIn(rel string, d time.Duration) {
	at := w.clock.Now().Add(d)
	w.later[rel] = at
	w.arm(at)
}

// relist asks for a relist, at once or when the tree is quiet.
func (w *watcher) relist(now bool) {
	if now {
		w.relistNow = true
		return
	}
	w.relistAt = w.clock.Now().Add(w.quiet)
	w.arm(w.relistAt)
}

// lost notes that events were lost (an overflow): only a relist can tell
// what changed.
func (w *watcher) lost(err error) {
	w.log.Warn("watch error; relisting", "err", err)
	w.relist(false)
}

// arm makes the timer fire by at. A timer that fires early finds nothing
// due and is armed again.
func (w *watcher) arm(at time.Time) {
	if w.due != nil && !at.Before(w.dueAt) {
		return
	}
	d := max(at.Sub(w.clock.Now()), 0)
	if w.timer == nil {
		w.timer = w.clock.NewTimer(d)
	} else {
		w.timer.Stop()
		w.timer.Reset(d)
	}
	w.due, w.dueAt = w.timer.C(), at
}

// drain notes ev and the events already queued behind it, so that a
// burst is one batch. It reports false when the notifier is closed.
func (w *watcher) drain(ev fsEvent) bool {
	w.note(ev)
	for range cap(w.n.events()) {
		select {
		case ev, ok := <-w.n.events():
			if !ok {
				return false
			}
			w.note(ev)
		default:
			return true
		}
	}
	return true
}

// ready reports whether something is due at once.
func (w *watcher) ready() bool { return w.relistNow || len(w.now) > 0 }

// take returns the batch due now and arms the timer for the next.
func (w *watcher) take() batch {
	now := w.clock.Now()
	w.due = nil
	b := batch{relist: w.relistNow || !w.relistAt.IsZero() && !now.Before(w.relistAt), waiting: map[string]bool{}}
	for rel := range w.now {
		b.paths = append(b.paths, rel)
	}
	clear(w.now)
	var next time.Time
	for rel, at := range w.later {
		if !now.Before(at) {
			b.paths = append(b.paths, rel)
			delete(w.later, rel)
			continue
		}
		b.waiting[rel] = true
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	slices.Sort(b.paths)
	if b.relist {
		w.relistNow, w.relistAt = false, time.Time{}
	} else if !w.relistAt.IsZero() && (next.IsZero() || w.relistAt.Before(next)) {
		next = w.relistAt
	}
	if !next.IsZero() {
		w.arm(next)
	}
	return b
}

// track watches exactly dirs, the directories of the tree at root ("" when
// the config dir is missing: nothing under it is watched). Every one is
// added again: the kernel drops the watch of a directory deleted and
// created again under the same name between two relists.
func (w *watcher) track(root string, dirs []string) {
	if root != w.root {
		for d := range w.watched {
			w.n.remove(d)
		}
		clear(w.watched)
		clear(w.plain)
		w.root = root
	}
	keep := map[string]bool{}
	for _, d := range dirs {
		keep[d] = true
		if err := w.n.add(d); err != nil {
			w.log.Warn("cannot watch directory", "dir", d, "err", err)
			continue
		}
		w.watched[d] = true
	}
	for d := range w.watched {
		if !keep[d] {
			w.n.remove(d)
			delete(w.watched, d)
		}
	}
}
