package reconcile

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// DesiredStore holds the declared objects (api/v1alpha1), one per Key, and
// numbers their spec changes in metadata.generation. It is the only
// writer of metadata.generation: the generation an object given to Set
// carries is ignored.
//
// Generation rules:
//   - a new key starts at generation 1, or continues the count Restore
//     gave it (saved by an earlier run): the saved generation when the
//     spec is the one it counted, the next one when not;
//   - Set of an object whose spec differs from the stored one increments
//     the generation; specs are compared by their JSON encoding, the form
//     they are declared in, so an omitted list or map equals an empty one
//     (and a restored count by its digest, SpecSum);
//   - labels and apiVersion are metadata, not spec: a change to them is a
//     change (Set reports it and handlers run) but keeps the generation, as
//     in Kubernetes;
//   - status is observed, not declared, state and is not stored here: Set
//     drops the status of the object it is given, and Get returns a zero
//     status. Status lives in a Store of the kind's status type under the
//     same key (Store[v1alpha1.ProfileStatus] for Profiles), where every
//     writer (controller, manifest source) merges its conditions with
//     Store.Update; the API joins the two when it serves an object;
//   - Delete forgets the key, and what Restore gave it: a later Set
//     starts again at 1.
//
// Get and List return deep copies (DeepCopyObject), and Set stores one:
// nothing a caller does to an object, before or after, changes the store.
//
// A DesiredStore is safe for concurrent use. Its handlers run after each
// change, with the changed key only, so a change costs O(that object), not
// O(all objects).
type DesiredStore struct {
	notifier notifier

	// mu guards the fields that follow. Lock order: mu, then an Index's
	// lock.
	mu sync.RWMutex
	// byKind maps kind → name → entry. A stored entry is never modified,
	// only replaced, so readers may copy it after releasing mu.
	byKind  map[string]map[string]*desiredEntry
	count   int
	indexes []desiredIndex
	// restored holds the counts Restore gave keys that are not stored.
	restored map[Key]Generation
}

type desiredEntry struct {
	obj  v1alpha1.Object
	spec []byte // JSON of obj's spec
}

// SpecSum is the SHA-256 digest of a spec's JSON encoding: what a saved
// count remembers of the spec it numbers.
type SpecSum [sha256.Size]byte

// Generation is a key's count of spec changes: the generation, and the
// digest of the spec it numbers. Its owner saves it to Restore the count
// after a restart.
type Generation struct {
	Generation int64
	Spec       SpecSum
}

type desiredIndex struct {
	ix   *Index
	refs func(v1alpha1.Object) []Key
}

// NewDesiredStore returns an empty store.
func NewDesiredStore() *DesiredStore {
	return &DesiredStore{byKind: make(map[string]map[string]*desiredEntry), restored: make(map[Key]Generation)}
}

// Restore gives key the count of an earlier run, for the next Set of key
// to continue (see the generation rules). It has no effect on a key that
// is stored.
func (d *DesiredStore) Restore(key Key, g Generation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKind[key.Kind][key.Name] == nil {
		d.restored[key] = g
	}
}

// GenerationOf returns the count of the object stored under key, for its
// owner to save.
func (d *DesiredStore) GenerationOf(key Key) (Generation, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e := d.byKind[key.Kind][key.Name]
	if e == nil {
		return Generation{}, false
	}
	return Generation{Generation: e.obj.GetObjectMeta().Generation, Spec: sha256.Sum256(e.spec)}, true
}

// KeyOf returns the key of obj: its kind and metadata.name.
func KeyOf(obj v1alpha1.Object) Key {
	return Key{Kind: obj.GetTypeMeta().Kind, Name: obj.GetObjectMeta().Name}
}

// Set stores a deep copy of obj under KeyOf(obj), following the generation
// rules of DesiredStore, and reports whether anything stored changed. When
// it did, every handler is called with the key. obj itself is not modified.
//
// obj must be a pointer to an API struct (such as *v1alpha1.Profile) with
// a kind and a name; otherwise Set returns ErrInvalidObject and stores
// nothing.
func (d *DesiredStore) Set(obj v1alpha1.Object) (changed bool, err error) {
	key, spec, err := inspect(obj)
	if err != nil {
		return false, err
	}
	// The common relist case, nothing changed, needs no copy.
	d.mu.RLock()
	old := d.byKind[key.Kind][key.Name]
	d.mu.RUnlock()
	if old != nil && bytes.Equal(old.spec, spec) && sameMeta(old.obj, obj) {
		return false, nil
	}
	stored := obj.DeepCopyObject()
	stored.ClearStatus()

	d.mu.Lock()
	changed = d.setLocked(key, stored, spec)
	d.mu.Unlock()
	if changed {
		d.notifier.notify(key)
	}
	return changed, nil
}

// Next returns the count Set(obj) would give obj now: the generation and
// the digest of obj's spec. The store's owner, the only caller of Set,
// uses it to record a generation before anyone can see it.
func (d *DesiredStore) Next(obj v1alpha1.Object) (Generation, error) {
	key, spec, err := inspect(obj)
	if err != nil {
		return Generation{}, err
	}
	d.mu.RLock()
	gen := d.nextLocked(key, spec)
	d.mu.RUnlock()
	return Generation{Generation: gen, Spec: sha256.Sum256(spec)}, nil
}

// nextLocked returns the generation of spec stored under key, following
// the generation rules.
func (d *DesiredStore) nextLocked(key Key, spec []byte) int64 {
	old := d.byKind[key.Kind][key.Name]
	switch r, restored := d.restored[key]; {
	case old == nil && restored:
		if r.Spec != sha256.Sum256(spec) {
			return max(r.Generation, 1) + 1
		}
		return max(r.Generation, 1)
	case old == nil:
		return 1
	case !bytes.Equal(old.spec, spec):
		return old.obj.GetObjectMeta().Generation + 1
	default:
		return old.obj.GetObjectMeta().Generation
	}
}

func (d *DesiredStore) setLocked(key Key, stored v1alpha1.Object, spec []byte) bool {
	names := d.byKind[key.Kind]
	old := names[key.Name]
	stored.GetObjectMeta().Generation = d.nextLocked(key, spec)
	if old != nil && bytes.Equal(old.spec, spec) && sameMeta(old.obj, stored) {
		return false
	}
	delete(d.restored, key)
	if names == nil {
		names = make(map[string]*desiredEntry)
		d.byKind[key.Kind] = names
	}
	if old == nil {
		d.count++
	}
	names[key.Name] = &desiredEntry{obj: stored, spec: spec}
	for _, di := range d.indexes {
		di.ix.Set(key, di.refs(stored)...)
	}
	return true
}

// sameMeta reports whether a and b differ in nothing Set records besides
// the spec: apiVersion and labels (nil labels equal empty ones).
func sameMeta(a, b v1alpha1.Object) bool {
	return a.GetTypeMeta().APIVersion == b.GetTypeMeta().APIVersion &&
		maps.Equal(a.GetObjectMeta().Labels, b.GetObjectMeta().Labels)
}

// Get returns a deep copy of the object stored under key.
func (d *DesiredStore) Get(key Key) (v1alpha1.Object, bool) {
	d.mu.RLock()
	e := d.byKind[key.Kind][key.Name]
	d.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	return e.obj.DeepCopyObject(), true
}

// Delete removes the object stored under key, and any count Restore gave
// it, and reports whether there was an object. When there was, every
// handler is called with the key.
func (d *DesiredStore) Delete(key Key) bool {
	d.mu.Lock()
	delete(d.restored, key)
	names := d.byKind[key.Kind]
	_, ok := names[key.Name]
	if ok {
		delete(names, key.Name)
		if len(names) == 0 {
			delete(d.byKind, key.Kind)
		}
		d.count--
		for _, di := range d.indexes {
			di.ix.Delete(key)
		}
	}
	d.mu.Unlock()
	if ok {
		d.notifier.notify(key)
	}
	return ok
}

// List returns deep copies of the objects of kind, sorted by name.
func (d *DesiredStore) List(kind string) []v1alpha1.Object {
	d.mu.RLock()
	entries := make([]*desiredEntry, 0, len(d.byKind[kind]))
	for _, e := range d.byKind[kind] {
		entries = append(entries, e)
	}
	d.mu.RUnlock()
	slices.SortFunc(entries, func(a, b *desiredEntry) int {
		return strings.Compare(a.obj.GetObjectMeta().Name, b.obj.GetObjectMeta().Name)
	})
	objs := make([]v1alpha1.Object, len(entries))
	for i, e := range entries {
		objs[i] = e.obj.DeepCopyObject()
	}
	return objs
}

// Keys returns the keys of the objects of kind, sorted by name. It copies
// no object.
func (d *DesiredStore) Keys(kind string) []Key {
	d.mu.RLock()
	keys := make([]Key, 0, len(d.byKind[kind]))
	for name := range d.byKind[kind] {
		keys = append(keys, Key{Kind: kind, Name: name})
	}
	d.mu.RUnlock()
	slices.SortFunc(keys, CompareKeys)
	return keys
}

// Len returns the number of objects stored, of every kind.
func (d *DesiredStore) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.count
}

// OnChange registers h to be called with the key of every object that Set
// changes or Delete removes, and returns the function that unregisters it.
// See Handler for what h may do.
func (d *DesiredStore) OnChange(h Handler) (remove func()) {
	return d.notifier.add(h)
}

// AddIndex returns an Index that the store keeps current: refs is called
// with each object as it is stored (and with every object already stored)
// and returns the keys that object references; Delete forgets them. refs
// runs under the store's lock and is given the stored object itself: it
// must be fast, must not call the store, and must not modify or keep obj.
//
// Typical use: refs returns the Profile key for a Workspace and nil for
// other kinds; Referrers of a Profile key are then its Workspaces.
func (d *DesiredStore) AddIndex(refs func(obj v1alpha1.Object) []Key) *Index {
	ix := NewIndex()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, names := range d.byKind {
		for _, e := range names {
			ix.Set(KeyOf(e.obj), refs(e.obj)...)
		}
	}
	d.indexes = append(d.indexes, desiredIndex{ix: ix, refs: refs})
	return ix
}

// inspect checks that obj can be stored and returns its key and the JSON
// of its spec.
func inspect(obj v1alpha1.Object) (Key, []byte, error) {
	if obj == nil {
		return Key{}, nil, fmt.Errorf("nil object: %w", ErrInvalidObject)
	}
	// A kind's methods work on its pointer; a typed nil would panic in
	// them.
	if v := reflect.ValueOf(obj); v.Kind() != reflect.Pointer || v.IsNil() {
		return Key{}, nil, fmt.Errorf("%T is not a pointer to an API struct: %w", obj, ErrInvalidObject)
	}
	key := KeyOf(obj)
	if key.Kind == "" || key.Name == "" {
		return Key{}, nil, fmt.Errorf("%T %q: kind and name are required: %w", obj, key.String(), ErrInvalidObject)
	}
	b, err := json.Marshal(obj.GetSpec())
	if err != nil {
		return Key{}, nil, fmt.Errorf("%s: encoding spec: %w: %w", key, ErrInvalidObject, err)
	}
	return key, b, nil
}
