package loader

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// LoadDir loads every manifest under dir, recursively, on all cores, and
// merges them (see Merge). One bad file never hides the others: the result
// holds the objects of every good file and the errors of every file. The
// error is non-nil only when dir itself cannot be read or ctx ends.
//
// Dotfiles, dot-directories and names Matches refuses are skipped. dir may
// be a symlink. Symlinks inside it are followed when their target stays
// inside dir, so the Kubernetes ConfigMap layout (x.yaml -> ..data/x.yaml,
// ..data -> ..2024_01_01_xxx) loads; a link out of dir, a dangling link
// and a loop are errors on the link. Files are reported as
// filepath.Join(dir, rel), rel being the path of the file or link inside
// dir.
func LoadDir(ctx context.Context, dir string) (*Result, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("config dir %s: %w", dir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("config dir %s: %w", dir, err)
	}
	w := walker{ctx: ctx, dir: dir, root: root}
	if err := w.walk(root, "", []string{root}); err != nil {
		return nil, fmt.Errorf("config dir %s: %w", dir, err)
	}

	files := make([]File, len(w.files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(w.files)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(w.files) {
					return
				}
				t := w.files[i]
				if t.err != nil {
					files[i] = File{Path: t.path, Errors: []*Error{t.err}}
					continue
				}
				data, rerr := readFile(t.real, t.path, true)
				if rerr != nil {
					files[i] = File{Path: t.path, Errors: []*Error{rerr}}
					continue
				}
				files[i] = LoadBytes(t.path, data)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Merge(files), nil
}

// task is one file to load, or an error found while walking, reported on
// path.
type task struct {
	path string // filepath.Join(dir, rel)
	rel  string // the path of the file or link inside dir
	real string // where to read it: a path under the resolved root
	err  *Error
}

// walker lists the manifests of a config dir.
type walker struct {
	ctx context.Context
	// dir is the config dir as the caller named it, for reports; root is
	// it resolved, for reading and containment.
	dir, root string
	files     []task
	dirs      []string // every directory walked, resolved, parents first
}

// walk lists directory real (resolved), seen as rel inside dir. ancestors
// are the resolved directories from the root down to real, to catch a
// symlink back into one of them. Only an unreadable root is an error; an
// unreadable subdirectory is reported on its path.
func (w *walker) walk(real, rel string, ancestors []string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		if rel == "" {
			return err
		}
		w.fail(rel, ErrRead, "cannot read directory: %v", pathErr(err))
		return nil
	}
	w.dirs = append(w.dirs, real)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		childReal, childRel := filepath.Join(real, name), filepath.Join(rel, name)
		switch t := e.Type(); {
		case t.IsDir():
			if err := w.walk(childReal, childRel, append(ancestors, childReal)); err != nil {
				return err
			}
		case t&fs.ModeSymlink != 0:
			if err := w.link(childReal, childRel, name, ancestors); err != nil {
				return err
			}
		case Matches(name):
			// Not known to be regular here (d_type may be unknown); the
			// read checks.
			w.files = append(w.files, task{path: filepath.Join(w.dir, childRel), rel: childRel, real: childReal})
		}
	}
	return nil
}

// link follows the symlink at real (seen as rel) when it stays inside the
// root: into a directory, or to a file when its name counts.
func (w *walker) link(real, rel, name string, ancestors []string) error {
	st, err := os.Stat(real)
	if err != nil {
		// A link that cannot be followed is reported when it would have
		// been loaded; one of any other name is reported only when it
		// loops, which is never intended.
		switch {
		case errors.Is(err, syscall.ELOOP):
			w.fail(rel, ErrSymlink, "symlink loop")
		case !Matches(name):
		case errors.Is(err, fs.ErrNotExist):
			dest, _ := os.Readlink(real)
			w.fail(rel, ErrSymlink, "dangling symlink to %s", dest)
		default:
			w.fail(rel, ErrRead, "cannot follow symlink: %v", pathErr(err))
		}
		return nil
	}
	if !st.IsDir() && !Matches(name) {
		return nil
	}
	target, err := filepath.EvalSymlinks(real)
	if err != nil {
		w.fail(rel, ErrRead, "cannot resolve symlink: %v", pathErr(err))
		return nil
	}
	if !w.inside(target) {
		w.fail(rel, ErrSymlink, "symlink to %s leaves the config directory", target)
		return nil
	}
	if !st.IsDir() {
		w.files = append(w.files, task{path: filepath.Join(w.dir, rel), rel: rel, real: target})
		return nil
	}
	if slices.Contains(ancestors, target) {
		inner, _ := filepath.Rel(w.root, target)
		w.fail(rel, ErrSymlink, "symlink loop: its target %s contains the link", filepath.Join(w.dir, inner))
		return nil
	}
	return w.walk(target, rel, append(ancestors, target))
}

// inside reports whether the resolved path p is the root or under it.
func (w *walker) inside(p string) bool {
	if p == w.root {
		return true
	}
	prefix := w.root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(p, prefix)
}

func (w *walker) fail(rel string, class error, format string, args ...any) {
	path := filepath.Join(w.dir, rel)
	w.files = append(w.files, task{path: path, rel: rel, err: &Error{
		File: path, Message: fmt.Sprintf(format, args...), class: class,
	}})
}

// pathErr drops the path from a file system error, which names the
// resolved path rather than the one reported.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Entry is one manifest file Walk found.
type Entry struct {
	// Rel is the file's path inside the walked dir; for a symlink, the
	// link's path.
	Rel string
	// Path is where to read it: under the resolved dir, symlinks resolved.
	Path string
}

// Listing is what Walk found in a config dir.
type Listing struct {
	// Root is the dir, symlinks resolved.
	Root string
	// Files are the manifests, in walk order.
	Files []Entry
	// Dirs are the directories walked, resolved, parents first: the ones
	// to watch for changes.
	Dirs []string
	// Errors are the problems found while walking (a symlink out of the
	// dir, a loop), reported on their path inside the dir.
	Errors []*Error
}

// Walk lists the manifests of dir as LoadDir does, without reading them,
// for a caller that loads files itself (the daemon's watcher reloads only
// what changed). The error is non-nil only when dir itself cannot be read
// or ctx ends.
func Walk(ctx context.Context, dir string) (*Listing, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("config dir %s: %w", dir, err)
	}
	w := walker{ctx: ctx, root: root}
	if err := w.walk(root, "", []string{root}); err != nil {
		return nil, fmt.Errorf("config dir %s: %w", dir, err)
	}
	l := &Listing{Root: root, Dirs: w.dirs}
	for _, t := range w.files {
		if t.err != nil {
			l.Errors = append(l.Errors, t.err)
			continue
		}
		l.Files = append(l.Files, Entry{Rel: t.rel, Path: t.real})
	}
	return l, nil
}

// ReadFile reads a file Walk listed, as LoadDir does: at most MaxFileSize
// bytes, never following a symlink swapped in since, never blocking on a
// FIFO. Problems are reported against report.
func ReadFile(path, report string) ([]byte, *Error) {
	return readFile(path, report, true)
}
