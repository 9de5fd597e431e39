package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/marshal-dev/marshal/api/loader"
)

// fileLoader reads the files a change may have touched and says how each
// now loads. It decides what a read means (unchanged, gone, emptied in
// place and given time), never what the directory declares.
type fileLoader struct {
	dir string // the config dir as configured
	// settling are the files emptied in place and given time to be
	// written again: the next look at one believes its emptiness.
	settling map[string]bool
}

// loadResult is what one look at the tree found.
type loadResult struct {
	// root is the directory the config dir leads to, "" when it is
	// missing (missing then says why). Set by a relist only.
	root    string
	missing error
	// changed are the files whose load changed (nil: the file is gone).
	changed map[string]*fileState
	// restamped are files whose stamp changed, not their content.
	restamped map[string]stamp
	// relist is set when a path needs the walk's judgement.
	relist bool
}

func newFileLoader(dir string) *fileLoader {
	return &fileLoader{dir: dir, settling: map[string]bool{}}
}

func newLoadResult() *loadResult {
	return &loadResult{changed: map[string]*fileState{}, restamped: map[string]stamp{}}
}

// relist walks the whole tree, stat-level, and loads what differs from
// known, leaving the files still waiting as they were. Before it stats
// anything it calls track with the root and the directories to watch, so
// that a change made while it looks is not missed.
func (l *fileLoader) relist(ctx context.Context, known map[string]*fileState, waiting map[string]bool, track func(root string, dirs []string)) (*loadResult, error) {
	res := newLoadResult()
	root, err := filepath.EvalSymlinks(l.dir)
	if err == nil {
		if fi, serr := os.Stat(root); serr != nil || !fi.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		res.missing = err
		track("", nil)
		for rel := range known {
			res.changed[rel] = nil
		}
		clear(l.settling)
		return res, nil
	}
	res.root = root
	walk, err := loader.Walk(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("listing config dir %s: %w", root, err)
	}
	track(root, walk.Dirs)

	seen := map[string]bool{}
	var toLoad []loader.Entry
	for _, e := range walk.Files {
		seen[e.Rel] = true
		if waiting[e.Rel] {
			continue
		}
		st, ok := statFile(e.Path)
		if !ok {
			l.gone(e.Rel, known, res)
			continue
		}
		if old := known[e.Rel]; old != nil && old.stamp == st && !l.settling[e.Rel] {
			continue
		}
		toLoad = append(toLoad, e)
	}
	// Walk errors (a symlink out of the dir, a loop) belong to a path
	// that loads nothing.
	walkErrs := map[string][]*loader.Error{}
	for _, e := range walk.Errors {
		walkErrs[e.File] = append(walkErrs[e.File], e)
	}
	for rel, errs := range walkErrs {
		seen[rel] = true
		if old := known[rel]; old == nil || !reflect.DeepEqual(old.errs, errs) {
			res.changed[rel] = &fileState{errs: errs}
		}
	}
	for rel := range known {
		if !seen[rel] && !waiting[rel] {
			l.gone(rel, known, res)
		}
	}
	for rel := range l.settling {
		if !seen[rel] && !waiting[rel] {
			delete(l.settling, rel)
		}
	}
	for _, f := range loadAll(toLoad) {
		l.accept(f.rel, f.state, f.err, known, res)
	}
	return res, nil
}

// check reloads the files rels (inside root) that events named.
func (l *fileLoader) check(root string, rels []string, known map[string]*fileState) *loadResult {
	res := newLoadResult()
	if root == "" {
		return res
	}
	for _, rel := range rels {
		path := filepath.Join(root, rel)
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			l.gone(rel, known, res)
			continue
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0 || !fi.Mode().IsRegular():
			// Whether a symlink may be followed is the walk's decision.
			res.relist = true
			continue
		}
		st, ok := statFile(path)
		if !ok {
			continue
		}
		if old := known[rel]; old != nil && old.stamp == st && !l.settling[rel] {
			continue
		}
		fresh, err := loadOne(loader.Entry{Rel: rel, Path: path}, st)
		l.accept(rel, fresh, err, known, res)
	}
	return res
}

// accept takes a file's fresh load into res, giving a file emptied in
// place time to be written again.
func (l *fileLoader) accept(rel string, fresh *fileState, readErr error, known map[string]*fileState, res *loadResult) {
	old := known[rel]
	if readErr != nil {
		if errors.Is(readErr, fs.ErrNotExist) {
			l.gone(rel, known, res)
		}
		return
	}
	if fresh.stamp.size == 0 && old != nil && len(old.good) > 0 && !l.settling[rel] {
		// An in-place save truncates before it writes: do not believe an
		// empty file until it has stayed empty for Settle.
		l.settling[rel] = true
		return
	}
	delete(l.settling, rel)
	if old != nil && old.sum == fresh.sum && len(old.errs) == 0 && len(fresh.errs) == 0 {
		res.restamped[rel] = fresh.stamp
		return
	}
	res.changed[rel] = fresh
}

// gone notes that rel no longer exists.
func (l *fileLoader) gone(rel string, known map[string]*fileState, res *loadResult) {
	delete(l.settling, rel)
	if known[rel] != nil {
		res.changed[rel] = nil
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
				f, err := loadOne(e, st)
				out[i] = loaded{rel: e.Rel, state: f, err: err}
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
	f := &fileState{stamp: st, sum: sha256.Sum256(data), errs: lf.Errors}
	if len(lf.Errors) == 0 {
		f.good = lf.Objects
	}
	return f, nil
}

// fileState is one file as last loaded.
type fileState struct {
	// stamp and sum identify the content that was loaded; only the
	// loader reads them.
	stamp stamp
	sum   [sha256.Size]byte
	// good are the file's objects, or, while errs is set, those of its
	// last good version.
	good []loader.Object
	errs []*loader.Error
}

// stamp identifies a file's content cheaply: if none of these changed, the
// content did not either.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}
