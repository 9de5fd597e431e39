package applier

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// Snapshot is the Declarations of a config dir as loaded at one moment,
// for callers without a manifest source: one-shot tools and tests. A file
// that does not load declares nothing in it.
type Snapshot struct {
	objects map[reconcile.Key]declared
	files   map[string][]reconcile.Key
}

type declared struct {
	file string
	obj  v1alpha1.Object
}

var (
	_ Declarations = (*Snapshot)(nil)
	_ KindLister   = (*Snapshot)(nil)
)

// Scan loads the config dir dir with the loader and returns what it
// declares. An object declared twice is declared by the file that wins
// (see loader.Merge), and is among the keys of both files.
func Scan(ctx context.Context, dir string) (*Snapshot, error) {
	res, err := loader.LoadDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{objects: map[reconcile.Key]declared{}, files: map[string][]reconcile.Key{}}
	rel := func(path string) (string, error) {
		r, err := filepath.Rel(dir, path)
		if err != nil {
			return "", fmt.Errorf("config dir %s: %w", dir, err)
		}
		return r, nil
	}
	for _, f := range res.Files {
		r, err := rel(f.Path)
		if err != nil {
			return nil, err
		}
		for _, o := range f.Objects {
			s.files[r] = append(s.files[r], keyOf(o.Object))
		}
	}
	for _, o := range res.Objects {
		r, err := rel(o.File)
		if err != nil {
			return nil, err
		}
		s.objects[keyOf(o.Object)] = declared{file: r, obj: o.Object}
	}
	return s, nil
}

// Lookup returns the file that declares key and its object.
func (s *Snapshot) Lookup(key reconcile.Key) (string, v1alpha1.Object, bool) {
	d, ok := s.objects[key]
	return d.file, d.obj, ok
}

// KeysIn returns the keys that file declares, in document order.
func (s *Snapshot) KeysIn(file string) []reconcile.Key {
	return slices.Clone(s.files[filepath.Clean(file)])
}

// Keys returns the declared keys of kind, sorted by name.
func (s *Snapshot) Keys(kind string) []reconcile.Key {
	var keys []reconcile.Key
	for k := range s.objects {
		if k.Kind == kind {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, reconcile.CompareKeys)
	return keys
}
