package reconcile

import (
	"reflect"
	"sync"
)

// deepCopy returns a copy of v that shares no memory reachable through
// exported fields, pointers, slices, maps or interfaces. Unexported struct
// fields are copied as they are (time.Time's location stays shared, as it
// is immutable); channels and functions are shared. v must be a tree: a
// value that points back into itself is not supported.
//
// The API types have no generated deep-copy methods, so the stores copy by
// reflection, through a copier compiled once per type.
func deepCopy[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	c := copierFor(rv.Type())
	if !c.refs {
		return v
	}
	out, _ := c.copy(rv).Interface().(T) // a nil interface stays nil
	return out
}

// DeepCopy returns a copy of v that shares nothing mutable with it, the
// copy the stores make on the way in and out (see deepCopy). Callers that
// must change a shared object, such as the daemon stamping generations on
// declared objects, copy it first.
func DeepCopy[T any](v T) T { return deepCopy(v) }

// hasRefs reports whether a value of type t reaches memory a plain
// assignment would share, through its exported parts.
func hasRefs(t reflect.Type) bool { return copierFor(t).refs }

// copier copies values of one type.
type copier struct {
	// refs is false when assignment is a deep copy already; copy is then
	// not called.
	refs bool
	// copy returns a deep copy of v. It is set once the copier is built.
	copy func(v reflect.Value) reflect.Value
}

type fieldCopier struct {
	index int
	c     *copier
}

var (
	// copiers holds every finished copier by type.
	copiers sync.Map // reflect.Type → *copier
	// buildMu serialises building, so each type is compiled once.
	buildMu sync.Mutex
)

func copierFor(t reflect.Type) *copier {
	if c, ok := copiers.Load(t); ok {
		return c.(*copier)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	building := make(map[reflect.Type]*copier)
	c := buildCopier(t, building)
	for bt, bc := range building {
		copiers.Store(bt, bc)
	}
	return c
}

// buildCopier compiles t's copier. building holds the copiers under
// construction, so a type reached again through a pointer refers to its
// own copier instead of recursing forever.
func buildCopier(t reflect.Type, building map[reflect.Type]*copier) *copier {
	if c, ok := copiers.Load(t); ok {
		return c.(*copier)
	}
	if c, ok := building[t]; ok {
		return c
	}
	c := &copier{}
	building[t] = c
	switch t.Kind() {
	case reflect.Pointer:
		c.refs = true
		elem := buildCopier(t.Elem(), building)
		c.copy = func(v reflect.Value) reflect.Value {
			if v.IsNil() {
				return reflect.Zero(t)
			}
			n := reflect.New(t.Elem())
			if elem.refs {
				n.Elem().Set(elem.copy(v.Elem()))
			} else {
				n.Elem().Set(v.Elem())
			}
			return n
		}
	case reflect.Slice:
		c.refs = true
		elem := buildCopier(t.Elem(), building)
		c.copy = func(v reflect.Value) reflect.Value {
			if v.IsNil() {
				return reflect.Zero(t)
			}
			n := reflect.MakeSlice(t, v.Len(), v.Len())
			if !elem.refs {
				reflect.Copy(n, v)
				return n
			}
			for i := range v.Len() {
				n.Index(i).Set(elem.copy(v.Index(i)))
			}
			return n
		}
	case reflect.Map:
		c.refs = true
		key, elem := buildCopier(t.Key(), building), buildCopier(t.Elem(), building)
		c.copy = func(v reflect.Value) reflect.Value {
			if v.IsNil() {
				return reflect.Zero(t)
			}
			n := reflect.MakeMapWithSize(t, v.Len())
			for it := v.MapRange(); it.Next(); {
				k, e := it.Key(), it.Value()
				if key.refs {
					k = key.copy(k)
				}
				if elem.refs {
					e = elem.copy(e)
				}
				n.SetMapIndex(k, e)
			}
			return n
		}
	case reflect.Interface:
		c.refs = true
		c.copy = func(v reflect.Value) reflect.Value {
			if v.IsNil() {
				return reflect.Zero(t)
			}
			n := reflect.New(t).Elem()
			if dc := copierFor(v.Elem().Type()); dc.refs {
				n.Set(dc.copy(v.Elem()))
			} else {
				n.Set(v.Elem())
			}
			return n
		}
	case reflect.Array:
		elem := buildCopier(t.Elem(), building)
		c.refs = elem.refs
		c.copy = func(v reflect.Value) reflect.Value {
			n := reflect.New(t).Elem()
			n.Set(v)
			for i := range v.Len() {
				n.Index(i).Set(elem.copy(v.Index(i)))
			}
			return n
		}
	case reflect.Struct:
		var fields []fieldCopier
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if fc := buildCopier(f.Type, building); fc.refs {
				fields = append(fields, fieldCopier{index: i, c: fc})
			}
		}
		c.refs = len(fields) > 0
		c.copy = func(v reflect.Value) reflect.Value {
			n := reflect.New(t).Elem()
			n.Set(v)
			for _, f := range fields {
				n.Field(f.index).Set(f.c.copy(v.Field(f.index)))
			}
			return n
		}
	}
	return c
}
