package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/inotify"
)

// Inotify masks of the kinds of watch a tree watcher holds.
const (
	// cgroupfs sends no IN_DELETE_SELF for a removed group, only IN_DELETE
	// to the parent: the tree's removal is seen on its parent.
	// cgroup2 lets a group be renamed within its parent: a group renamed
	// comes (IN_MOVED_TO) and goes (IN_MOVED_FROM) as one made or removed.
	parentMask = unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_ONLYDIR
	treeMask   = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	sliceMask  = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_ONLYDIR
	// The kernel reports a change of cgroup.events as IN_MODIFY on the file.
	eventsMask = unix.IN_MODIFY
)

// WatchTree reports what happens to the marshal scopes below dir, the
// absolute path of a marshal.slice group on the cgroup2 mount mount, by
// calling fn, until ctx ends. It returns ctx.Err() once no further call to
// fn can happen, and an error wrapping ErrNotFound when dir does not exist
// or is removed while watched.
//
// It is driven by inotify alone (no timer, no polling): IN_CREATE and
// IN_DELETE on dir (profile slices) and on each slice (scopes), IN_MODIFY
// on each scope's cgroup.events (populated), IN_DELETE on dir's parent
// (the tree itself). It starts with a relist that reports every existing
// scope, and relists when the kernel's event queue overflowed (IN_Q_OVERFLOW).
// Events that come from a relist have Resync set and report the
// differences from what was reported before: scopes created, populated,
// emptied or removed meanwhile. A relist that finds nothing changed
// reports nothing.
//
// For each scope, events come in the order ScopeCreated, ScopePopulated,
// ScopeEmptied, ScopeRemoved (populated and emptied possibly repeated);
// the Scope in each carries Populated as read then. A group cannot be
// removed while populated, so a scope removed while last seen populated is
// reported emptied first. The kernel rate-limits cgroup.events
// notifications, so ScopeEmptied can come up to about 20 ms after the
// group emptied; a scope populated and emptied between two reads of its
// cgroup.events is reported by neither event.
//
// fn is called from the goroutine that called WatchTree, one event at a
// time; WatchTree starts no goroutine of its own that outlives it.
func WatchTree(ctx context.Context, mount, dir string, fn func(Event)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := newTreeWatcher(mount, dir, fn)
	if err != nil {
		return err
	}
	defer w.close()
	if err := w.relist(true); err != nil {
		return err
	}
	buf := make([]byte, inotify.BufferSize)
	for {
		n, err := w.in.ReadContext(ctx, buf)
		if err != nil {
			return err
		}
		err = inotify.Decode(buf[:n], func(ev inotify.Event) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return w.handle(ev)
		})
		if err != nil {
			return err
		}
	}
}

// WaitEvents blocks until cond holds for the cgroup.events of v2 group dir,
// re-reading the file each time the kernel reports a change, and returns
// what it read last. It returns ctx.Err() when ctx ends first, and an error
// wrapping ErrNotFound when the group does not exist or is removed.
func WaitEvents(ctx context.Context, dir string, cond func(GroupEvents) bool) (GroupEvents, error) {
	in, err := inotify.Open()
	if err != nil {
		return GroupEvents{}, err
	}
	defer in.Close()
	if _, err := in.Add(filepath.Join(dir, FileEvents), eventsMask); err != nil {
		return GroupEvents{}, fmt.Errorf("watching %s: %w", dir, notFound(err))
	}
	buf := make([]byte, 4096)
	for {
		ev, err := ReadEvents(dir)
		if err != nil || cond(ev) {
			return ev, err
		}
		n, err := in.ReadContext(ctx, buf)
		if err != nil {
			return GroupEvents{}, err
		}
		removed := false
		inotify.Decode(buf[:n], func(e inotify.Event) error {
			removed = removed || e.Mask&unix.IN_IGNORED != 0
			return nil
		})
		if removed {
			return GroupEvents{}, fmt.Errorf("%s was removed: %w", dir, ErrNotFound)
		}
	}
}

// treeWatcher holds what a WatchTree call has reported so far, so that it
// reports changes, and the inotify watches that tell it about them. It is
// used by one goroutine only and has no lock.
type treeWatcher struct {
	mount, dir string
	fn         func(Event)
	in         *inotify.File
	treeWD     int32
	parentWD   int32

	watches map[int32]watchRef     // inotify watch → what it watches
	slices  map[string]*sliceState // by slice name
	scopes  map[string]*scopeState // by scope name, across all slices
}

// watchRef says what an inotify watch is on: the tree (both empty), a
// slice directory (scope empty) or a scope's cgroup.events.
type watchRef struct {
	slice, scope string
}

type sliceState struct {
	wd     int32 // 0 once the kernel dropped the watch
	scopes map[string]struct{}
}

type scopeState struct {
	scope Scope // as last reported
	slice string
	wd    int32 // watch on cgroup.events; 0 when none
}

func newTreeWatcher(mount, dir string, fn func(Event)) (*treeWatcher, error) {
	mount, dir = filepath.Clean(mount), filepath.Clean(dir)
	if rel, err := relPath(mount, dir); err != nil || rel == "/" {
		return nil, fmt.Errorf("watching %s: want a group below the cgroup2 mount %s", dir, mount)
	}
	in, err := inotify.Open()
	if err != nil {
		return nil, err
	}
	// The parent first: once the tree is watched, its removal is seen.
	parentWD, err := in.Add(filepath.Dir(dir), parentMask)
	if err != nil {
		in.Close()
		return nil, notFound(err)
	}
	wd, err := in.Add(dir, treeMask)
	if err != nil {
		in.Close()
		return nil, notFound(err)
	}
	return &treeWatcher{
		mount:    mount,
		dir:      dir,
		fn:       fn,
		in:       in,
		treeWD:   wd,
		parentWD: parentWD,
		watches:  map[int32]watchRef{wd: {}},
		slices:   map[string]*sliceState{},
		scopes:   map[string]*scopeState{},
	}, nil
}

func (w *treeWatcher) close() {
	w.in.Close()
}

func (w *treeWatcher) emit(t EventType, s Scope, resync bool) {
	w.fn(Event{Type: t, Scope: s, Resync: resync})
}

// handle applies one inotify event.
func (w *treeWatcher) handle(ev inotify.Event) error {
	if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
		return w.relist(true)
	}
	if ev.WD == w.parentWD {
		if ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 && ev.Name == filepath.Base(w.dir) {
			return w.treeRemoved()
		}
		return nil
	}
	ref, ok := w.watches[ev.WD]
	if !ok {
		return nil // a watch already dropped; its object was handled
	}
	if ev.Mask&unix.IN_IGNORED != 0 {
		delete(w.watches, ev.WD)
	}
	switch {
	case ev.WD == w.treeWD:
		if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
			return w.treeRemoved()
		}
		if ev.Mask&unix.IN_ISDIR == 0 {
			return nil
		}
		switch {
		case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			if _, known := w.slices[ev.Name]; !known {
				return w.addSlice(ev.Name, false)
			}
		case ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			w.removeSlice(ev.Name, false)
		}
	case ref.scope == "":
		if ev.Mask&unix.IN_IGNORED != 0 {
			if s := w.slices[ref.slice]; s != nil && s.wd == ev.WD {
				s.wd = 0
			}
			return nil
		}
		if ev.Mask&unix.IN_ISDIR == 0 {
			return nil
		}
		switch {
		case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			return w.addScope(ref.slice, ev.Name, false)
		case ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			if st := w.scopes[ev.Name]; st != nil && st.slice == ref.slice {
				w.removeScope(ev.Name, false)
			}
		}
	default:
		st := w.scopes[ref.scope]
		if st == nil {
			return nil
		}
		if ev.Mask&unix.IN_IGNORED != 0 {
			if st.wd == ev.WD {
				st.wd = 0
			}
			return nil
		}
		if ev.Mask&unix.IN_MODIFY != 0 {
			return w.refreshScope(ref.scope, false)
		}
	}
	return nil
}

// treeRemoved reports every scope still known removed and ends the watch.
func (w *treeWatcher) treeRemoved() error {
	for _, name := range sortedKeys(w.slices) {
		w.removeSlice(name, false)
	}
	return fmt.Errorf("%s was removed: %w", w.dir, ErrNotFound)
}

// relist reads the whole tree and reports every difference from what was
// reported before.
func (w *treeWatcher) relist(resync bool) error {
	names, err := listGroups(w.dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", w.dir, notFound(err))
	}
	seen := map[string]bool{}
	for _, name := range names {
		if _, ok := sliceProfile(name); !ok {
			continue
		}
		seen[name] = true
		if _, known := w.slices[name]; known {
			err = w.syncSlice(name, resync)
		} else {
			err = w.addSlice(name, resync)
		}
		if err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(w.slices) {
		if !seen[name] {
			w.removeSlice(name, resync)
		}
	}
	return nil
}

// addSlice starts watching a new slice and reports the scopes in it.
func (w *treeWatcher) addSlice(name string, resync bool) error {
	if _, ok := sliceProfile(name); !ok {
		return nil
	}
	wd, err := w.in.Add(filepath.Join(w.dir, name), sliceMask)
	if isGone(err) {
		return nil // removed already; its IN_DELETE follows
	}
	if err != nil {
		return err
	}
	w.slices[name] = &sliceState{wd: wd, scopes: map[string]struct{}{}}
	w.watches[wd] = watchRef{slice: name}
	return w.syncSlice(name, resync)
}

// syncSlice lists a watched slice and reports every difference from what
// was reported before.
func (w *treeWatcher) syncSlice(name string, resync bool) error {
	sl := w.slices[name]
	names, err := listGroups(filepath.Join(w.dir, name))
	if isGone(err) {
		return nil // removed; its IN_DELETE or the relist's diff follows
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", name, err)
	}
	seen := map[string]bool{}
	for _, sc := range names {
		if _, ok := scopeIn(name, sc); !ok {
			continue
		}
		seen[sc] = true
		if _, known := sl.scopes[sc]; known {
			err = w.refreshScope(sc, resync)
		} else {
			err = w.addScope(name, sc, resync)
		}
		if err != nil {
			return err
		}
	}
	for _, sc := range sortedKeys(sl.scopes) {
		if !seen[sc] {
			w.removeScope(sc, resync)
		}
	}
	return nil
}

// removeSlice reports every scope of a slice removed and forgets it.
func (w *treeWatcher) removeSlice(name string, resync bool) {
	sl := w.slices[name]
	if sl == nil {
		return
	}
	for _, sc := range sortedKeys(sl.scopes) {
		w.removeScope(sc, resync)
	}
	if sl.wd != 0 {
		delete(w.watches, sl.wd)
		w.in.Remove(sl.wd)
	}
	delete(w.slices, name)
}

// addScope starts watching a new scope's cgroup.events and reports it
// created, and populated when it is.
func (w *treeWatcher) addScope(slice, name string, resync bool) error {
	sl := w.slices[slice]
	id, ok := scopeIn(slice, name)
	if sl == nil || !ok {
		return nil
	}
	if _, known := w.scopes[name]; known {
		return nil // listed by a relist before its IN_CREATE was read
	}
	dir := filepath.Join(w.dir, slice, name)
	path, err := relPath(w.mount, dir)
	if err != nil {
		return err
	}
	st := &scopeState{slice: slice, scope: Scope{Name: name, Profile: id.Profile, ID: id.ID, Path: path}}
	// Watch first, then read: a change between the two is then reported
	// by the watch instead of lost.
	wd, err := w.in.Add(filepath.Join(dir, FileEvents), eventsMask)
	switch {
	case err == nil:
		st.wd = wd
		w.watches[wd] = watchRef{slice: slice, scope: name}
	case !isGone(err):
		return err
	}
	// A scope gone already is still reported: its IN_DELETE, queued behind
	// this event, reports it removed.
	if ev, err := ReadEvents(dir); err == nil {
		st.scope.Populated = ev.Populated
	}
	w.scopes[name] = st
	sl.scopes[name] = struct{}{}
	w.emit(ScopeCreated, st.scope, resync)
	if st.scope.Populated {
		w.emit(ScopePopulated, st.scope, resync)
	}
	return nil
}

// refreshScope re-reads a scope's cgroup.events and reports a change of
// populated.
func (w *treeWatcher) refreshScope(name string, resync bool) error {
	st := w.scopes[name]
	if st == nil {
		return nil
	}
	ev, err := ReadEvents(filepath.Join(w.dir, st.slice, name))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil // being removed; IN_DELETE follows
		}
		return err
	}
	if ev.Populated == st.scope.Populated {
		return nil
	}
	st.scope.Populated = ev.Populated
	if ev.Populated {
		w.emit(ScopePopulated, st.scope, resync)
	} else {
		w.emit(ScopeEmptied, st.scope, resync)
	}
	return nil
}

// removeScope reports a scope removed, emptied first when it was last seen
// populated, and forgets it.
func (w *treeWatcher) removeScope(name string, resync bool) {
	st := w.scopes[name]
	if st == nil {
		return
	}
	if st.wd != 0 {
		delete(w.watches, st.wd)
		w.in.Remove(st.wd)
	}
	if st.scope.Populated {
		st.scope.Populated = false
		w.emit(ScopeEmptied, st.scope, resync)
	}
	w.emit(ScopeRemoved, st.scope, resync)
	if sl := w.slices[st.slice]; sl != nil {
		delete(sl.scopes, name)
	}
	delete(w.scopes, name)
}

// listGroups returns the names of the child groups of dir, sorted.
func listGroups(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// isGone reports whether err says the path is no longer there.
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
