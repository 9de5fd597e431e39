package v1alpha1

import (
	"strconv"
	"strings"
)

// PathElem is one step of a Path: a field name, a list index or a map key.
type PathElem struct {
	// Name is the field's key as written in manifests, when this step is
	// a field.
	Name string
	// Index is the list position, when IsIndex.
	Index int
	// IsIndex marks a list position.
	IsIndex bool
	// Key is the map key, when IsKey.
	Key string
	// IsKey marks a map key.
	IsKey bool
}

// Path locates a value inside an object, as written in its manifest:
// spec.exec.argv0[2], spec.exec.env[HOME]. Paths are values; every method
// returns a new path and leaves the receiver as it was.
type Path struct {
	elems []PathElem
}

// NewPath returns the path of nested fields names.
func NewPath(names ...string) Path { return Path{}.Child(names...) }

func (p Path) with(e PathElem) Path {
	elems := make([]PathElem, len(p.elems), len(p.elems)+1)
	copy(elems, p.elems)
	return Path{elems: append(elems, e)}
}

// Child returns the path of the nested fields names inside p.
func (p Path) Child(names ...string) Path {
	for _, n := range names {
		p = p.with(PathElem{Name: n})
	}
	return p
}

// Index returns the path of list element i of p.
func (p Path) Index(i int) Path { return p.with(PathElem{Index: i, IsIndex: true}) }

// Key returns the path of map entry k of p.
func (p Path) Key(k string) Path { return p.with(PathElem{Key: k, IsKey: true}) }

// Elems returns the steps of p.
func (p Path) Elems() []PathElem { return p.elems }

// String writes p as spec.exec.argv0[2].
func (p Path) String() string {
	var b strings.Builder
	for i, e := range p.elems {
		switch {
		case e.IsIndex:
			b.WriteString("[" + strconv.Itoa(e.Index) + "]")
		case e.IsKey:
			b.WriteString("[" + e.Key + "]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.Name)
		}
	}
	return b.String()
}

// FieldError is one invalid value: where it is and what is wrong with it.
type FieldError struct {
	// Path locates the value.
	Path Path
	// Message says what is wrong, in words a person can act on.
	Message string
}

func (e *FieldError) Error() string {
	if len(e.Path.elems) == 0 {
		return e.Message
	}
	return e.Path.String() + ": " + e.Message
}

// ErrorList is every invalid value of an object.
type ErrorList []*FieldError
