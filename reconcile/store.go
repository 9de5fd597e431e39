package reconcile

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// Store holds observed facts of type T, one per Key: live scopes, usage,
// the host's probe, the status controllers write. It is the observed-state
// counterpart of DesiredStore and is safe for concurrent use.
//
// Values are copied on the way in and out with T's DeepCopyInto when *T
// has one (the API's statuses do), so callers cannot change what is
// stored; any other T must be made only of values, and is stored as it
// is. StoreOptions can replace both the copy and the equality used to
// detect changes.
type Store[T any] struct {
	equal    func(a, b T) bool
	clone    func(T) T
	notifier notifier

	// mu guards the fields that follow. Lock order: mu, then an Index's
	// lock.
	mu      sync.RWMutex
	items   map[Key]T
	indexes []storeIndex[T]
}

type storeIndex[T any] struct {
	ix   *Index
	refs func(Key, T) []Key
}

// Entry is one key and its value, as List returns them.
type Entry[T any] struct {
	Key   Key
	Value T
}

// StoreOptions customise a Store. The zero value is usable.
type StoreOptions[T any] struct {
	// Equal reports whether two values are the same fact, so that Set of an
	// equal value changes nothing and runs no handler. Default
	// reflect.DeepEqual.
	Equal func(a, b T) bool
	// Clone returns a copy of a value that shares nothing mutable with it.
	// Default: T's DeepCopyInto when *T has one; none when T is made only
	// of values.
	Clone func(T) T
}

// NewStore returns an empty store. It panics when T reaches shared memory
// (pointers, slices, maps, interfaces, channels, functions) but neither
// has a DeepCopyInto nor is given a Clone: such a store would let callers
// change what it holds.
func NewStore[T any](o StoreOptions[T]) *Store[T] {
	if o.Equal == nil {
		o.Equal = func(a, b T) bool { return reflect.DeepEqual(a, b) }
	}
	if o.Clone == nil {
		if _, ok := any((*T)(nil)).(interface{ DeepCopyInto(*T) }); ok {
			o.Clone = func(v T) T {
				var out T
				any(&v).(interface{ DeepCopyInto(*T) }).DeepCopyInto(&out)
				return out
			}
		} else if t := reflect.TypeFor[T](); reachesMemory(t, map[reflect.Type]bool{}) {
			panic(fmt.Sprintf("reconcile.NewStore: %v holds references: give *%v a DeepCopyInto method, or StoreOptions a Clone", t, t))
		} else {
			o.Clone = func(v T) T { return v }
		}
	}
	return &Store[T]{equal: o.Equal, clone: o.Clone, items: make(map[Key]T)}
}

// Set stores a copy of v under key and reports whether it differs from
// what was stored (a new key always does). When it does, every handler is
// called with key.
func (s *Store[T]) Set(key Key, v T) (changed bool) {
	v = s.clone(v)
	s.mu.Lock()
	old, ok := s.items[key]
	if ok && s.equal(old, v) {
		s.mu.Unlock()
		return false
	}
	s.items[key] = v
	for _, si := range s.indexes {
		si.ix.Set(key, si.refs(key, v)...)
	}
	s.mu.Unlock()
	s.notifier.notify(key)
	return true
}

// Update changes the value under key atomically, for writers that share a
// value (two writers of one status, each owning some conditions). fn is
// given a copy of the current value, or the zero T and false when there is
// none, and returns the new value and true, or false to delete the key
// (or leave it absent). It reports whether anything changed; when it did,
// every handler is called with key. fn runs under the store's lock: it
// must be fast and must not call the store.
func (s *Store[T]) Update(key Key, fn func(v T, ok bool) (T, bool)) (changed bool) {
	s.mu.Lock()
	old, had := s.items[key]
	cur := old
	if had {
		cur = s.clone(old)
	}
	v, keep := fn(cur, had)
	switch {
	case !keep && !had:
		s.mu.Unlock()
		return false
	case !keep:
		delete(s.items, key)
		for _, si := range s.indexes {
			si.ix.Delete(key)
		}
	case had && s.equal(old, v):
		s.mu.Unlock()
		return false
	default:
		// v may share memory with values fn's closure holds.
		v = s.clone(v)
		s.items[key] = v
		for _, si := range s.indexes {
			si.ix.Set(key, si.refs(key, v)...)
		}
	}
	s.mu.Unlock()
	s.notifier.notify(key)
	return true
}

// Get returns a copy of the value stored under key.
func (s *Store[T]) Get(key Key) (T, bool) {
	s.mu.RLock()
	v, ok := s.items[key]
	s.mu.RUnlock()
	if !ok {
		return v, false
	}
	return s.clone(v), true
}

// Delete removes key and reports whether it was stored. When it was, every
// handler is called with key.
func (s *Store[T]) Delete(key Key) bool {
	s.mu.Lock()
	_, ok := s.items[key]
	if ok {
		delete(s.items, key)
		for _, si := range s.indexes {
			si.ix.Delete(key)
		}
	}
	s.mu.Unlock()
	if ok {
		s.notifier.notify(key)
	}
	return ok
}

// List returns copies of every entry, sorted by key.
func (s *Store[T]) List() []Entry[T] {
	s.mu.RLock()
	out := make([]Entry[T], 0, len(s.items))
	for k, v := range s.items {
		out = append(out, Entry[T]{Key: k, Value: v})
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Entry[T]) int { return CompareKeys(a.Key, b.Key) })
	for i := range out {
		out[i].Value = s.clone(out[i].Value)
	}
	return out
}

// Keys returns every key, sorted.
func (s *Store[T]) Keys() []Key {
	s.mu.RLock()
	keys := make([]Key, 0, len(s.items))
	for k := range s.items {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	slices.SortFunc(keys, CompareKeys)
	return keys
}

// Len returns the number of entries.
func (s *Store[T]) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.items)
}

// OnChange registers h to be called with every key that Set changes or
// Delete removes, and returns the function that unregisters it. See Handler
// for what h may do.
func (s *Store[T]) OnChange(h Handler) (remove func()) {
	return s.notifier.add(h)
}

// AddIndex returns an Index that the store keeps current: refs is called
// with each entry as it is stored (and every entry already stored) and
// returns the keys it references; Delete forgets them. refs runs under the
// store's lock with the stored value itself: it must be fast, must not call
// the store, and must not modify or keep v.
func (s *Store[T]) AddIndex(refs func(key Key, v T) []Key) *Index {
	ix := NewIndex()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.items {
		ix.Set(k, refs(k, v)...)
	}
	s.indexes = append(s.indexes, storeIndex[T]{ix: ix, refs: refs})
	return ix
}

// reachesMemory reports whether a value of type t refers to memory that
// an assignment would share, through its exported fields (unexported ones,
// such as time.Time's location, are the type's own business). seen breaks
// cycles.
func reachesMemory(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return reachesMemory(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && reachesMemory(f.Type, seen) {
				return true
			}
		}
	}
	return false
}
