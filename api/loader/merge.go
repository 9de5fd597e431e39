package loader

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Result is the merged outcome of loading many files.
type Result struct {
	// Objects are the objects in effect, sorted by kind, then name: every
	// object of a good file, and of an object declared more than once
	// only its first declaration.
	Objects []Object
	// Errors are every file's errors and the conflicts between files,
	// sorted by file, then line.
	Errors []*Error
	// Files are the files in path order, each as it loaded on its own:
	// conflicts with other files are not among its Errors.
	Files []File
}

// Merge combines files into one result. The same kind and name declared
// twice, in two files or in one, is a conflict (ErrConflict) reported on
// both declarations; the first in path order (byte order), then document
// order, wins, so repeated loads agree. A Host after the first, whatever
// its name, is refused the same way (ErrHostSingleton). Neither makes a
// file fail: its other objects stay in effect.
func Merge(files []File) *Result {
	r := &Result{Files: slices.Clone(files)}
	slices.SortStableFunc(r.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })

	type key struct{ kind, name string }
	winners := map[key]Object{}
	var host *Object
	var merged []*Error
	for _, f := range r.Files {
		r.Errors = append(r.Errors, f.Errors...)
		for _, o := range f.Objects {
			kind, name := o.GetTypeMeta().Kind, o.GetObjectMeta().Name
			k := key{kind, name}
			if w, ok := winners[k]; ok {
				merged = append(merged,
					declError(w, ErrConflict, "declared more than once: also at %s:%d; this declaration is used", o.File, o.Line),
					declError(o, ErrConflict, "declared more than once: first at %s:%d, which is used; this one is ignored", w.File, w.Line))
				continue
			}
			if kind == v1alpha1.KindHost && host != nil {
				merged = append(merged, declError(o, ErrHostSingleton,
					"only one Host may be declared: Host %q at %s:%d is used; this one is ignored",
					host.GetObjectMeta().Name, host.File, host.Line))
				continue
			}
			winners[k] = o
			if kind == v1alpha1.KindHost {
				host = &o
			}
			r.Objects = append(r.Objects, o)
		}
	}
	r.Errors = append(r.Errors, merged...)
	slices.SortStableFunc(r.Errors, func(a, b *Error) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	slices.SortFunc(r.Objects, func(a, b Object) int {
		return cmp.Or(
			strings.Compare(a.GetTypeMeta().Kind, b.GetTypeMeta().Kind),
			strings.Compare(a.GetObjectMeta().Name, b.GetObjectMeta().Name))
	})
	return r
}

func declError(o Object, class error, format string, args ...any) *Error {
	return &Error{
		File:    o.File,
		Line:    o.Line,
		Kind:    o.GetTypeMeta().Kind,
		Name:    o.GetObjectMeta().Name,
		Message: fmt.Sprintf(format, args...),
		class:   class,
	}
}
