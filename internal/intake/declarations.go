package intake

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// declarations turns the loads of an origin's units (a config dir's
// files, the objects of an API) into what the origin declares: which
// unit's object wins a kind and name, the one Host, the last good objects
// of a unit that stopped loading, and the hold of an emptied origin. It does no I/O: what must be recorded, persisted
// or told to the sink comes back as an outcome.
type declarations struct {
	origin Origin

	files    map[string]*unitState
	index    map[reconcile.Key][]declRef // every declaration of a key, sorted
	hosts    map[reconcile.Key]bool      // the keys of kind Host in index
	desired  map[reconcile.Key]*Declaration
	declared map[reconcile.Key]*Declaration // what the sink was told
	held     bool
}

// unitState is one unit as last declared.
type unitState struct {
	// good are the unit's objects, or, while errs is set, those of its
	// last good version.
	good []loader.Object
	errs []*loader.Error
}

type declRef struct {
	file string
	obj  loader.Object
}

// outcome is what one change to the declarations asks of the Feed.
type outcome struct {
	// events are to be recorded, in order.
	events []event
	// persist maps files to their encoded last good objects; nil deletes.
	persist map[string][]byte
	// changes are for the sink, sorted by key.
	changes []Change
	// nowHeld is how many objects an emptying of the directory holds,
	// when this change started the hold.
	nowHeld int
}

type event struct {
	warning bool
	key     reconcile.Key
	reason  string
	message string
}

func newDeclarations(origin Origin) *declarations {
	return &declarations{
		origin:   origin,
		files:    map[string]*unitState{},
		index:    map[reconcile.Key][]declRef{},
		hosts:    map[reconcile.Key]bool{},
		desired:  map[reconcile.Key]*Declaration{},
		declared: map[reconcile.Key]*Declaration{},
	}
}

// apply installs changed files (nil: the file is gone). A file that loads
// with errors keeps the objects of its last good version. When hold is
// set, a change that leaves nothing declared is held; otherwise it is
// taken as meant.
func (d *declarations) apply(changed map[string]*unitState, hold bool) outcome {
	var out outcome
	if len(changed) == 0 && !d.held {
		return out
	}
	touched := map[reconcile.Key]bool{}
	out.persist = map[string][]byte{}
	for _, rel := range sortedKeys(changed) {
		fresh := changed[rel]
		old := d.files[rel]
		if old != nil {
			for _, o := range old.good {
				k := keyOf(o)
				touched[k] = true
				d.index[k] = slices.DeleteFunc(d.index[k], func(r declRef) bool { return r.file == rel })
				if len(d.index[k]) == 0 {
					delete(d.index, k)
					delete(d.hosts, k)
				}
			}
		}
		if fresh == nil {
			delete(d.files, rel)
			if old != nil && len(old.good) > 0 {
				out.persist[rel] = nil
			}
			continue
		}
		if len(fresh.errs) > 0 && old != nil {
			fresh.good = old.good
		}
		d.files[rel] = fresh
		for _, o := range fresh.good {
			k := keyOf(o)
			touched[k] = true
			d.index[k] = append(d.index[k], declRef{file: rel, obj: o})
			sort.SliceStable(d.index[k], func(i, j int) bool { return declLess(d.index[k][i], d.index[k][j]) })
			if k.Kind == v1alpha1.KindHost {
				d.hosts[k] = true
			}
		}
		if len(fresh.errs) == 0 {
			out.persist[rel] = encodeGood(fresh.good)
		}
		if ev, ok := d.fileEvent(rel, old, fresh); ok {
			out.events = append(out.events, ev)
		}
	}
	hostsTouched := false
	for k := range touched {
		hostsTouched = hostsTouched || k.Kind == v1alpha1.KindHost
	}
	if hostsTouched {
		for k := range d.hosts {
			touched[k] = true
		}
	}
	for k := range touched {
		if decl := d.declare(k); decl != nil {
			d.desired[k] = decl
		} else {
			delete(d.desired, k)
		}
	}
	d.publish(touched, hold, &out)
	return out
}

// declare computes the declaration of k from the index.
func (d *declarations) declare(k reconcile.Key) *Declaration {
	refs := d.index[k]
	if len(refs) == 0 {
		return nil
	}
	win := refs[0]
	decl := &Declaration{Object: win.obj.Object, File: win.file, Line: win.obj.Line, Invalid: d.files[win.file].errs}
	for _, r := range refs[1:] {
		decl.Conflicts = append(decl.Conflicts, fmt.Sprintf("%s:%d", r.file, r.obj.Line))
	}
	if k.Kind == v1alpha1.KindHost {
		// At most one Host: the first declaration in path order wins.
		for hk := range d.hosts {
			if hk == k {
				continue
			}
			hrefs := d.index[hk]
			if declLess(hrefs[0], win) {
				return nil
			}
			decl.Conflicts = append(decl.Conflicts, fmt.Sprintf("%s:%d", hrefs[0].file, hrefs[0].obj.Line))
		}
		sort.Strings(decl.Conflicts)
	}
	return decl
}

// publish adds to out what changed among keys for the sink, unless an
// emptying must be held.
func (d *declarations) publish(keys map[reconcile.Key]bool, hold bool, out *outcome) {
	if len(d.desired) == 0 && len(d.declared) > 0 && (hold || d.held) {
		if !d.held {
			d.held = true
			out.nowHeld = len(d.declared)
			out.events = append(out.events, event{true, d.origin.Key, "EmptiedHeld", fmt.Sprintf(
				"%s went from %d objects to none; nothing was deleted. Restore it, or run marshalctl apply --allow-empty to confirm", d.origin.Name, len(d.declared))})
		}
		return
	}
	if d.held {
		// Released: everything may differ from what the sink was told.
		d.held = false
		for k := range d.declared {
			keys[k] = true
		}
		for k := range d.desired {
			keys[k] = true
		}
		out.events = append(out.events, event{false, d.origin.Key, "HoldReleased", d.origin.Name + " declares objects again"})
	}
	for k := range keys {
		decl := d.desired[k]
		if declEqual(d.declared[k], decl) {
			continue
		}
		if decl == nil {
			delete(d.declared, k)
		} else {
			d.declared[k] = decl
		}
		out.changes = append(out.changes, Change{k, decl})
	}
	slices.SortFunc(out.changes, func(a, b Change) int { return reconcile.CompareKeys(a.Key, b.Key) })
	for _, c := range out.changes {
		if decl := c.Declaration; decl != nil && len(decl.Conflicts) > 0 {
			out.events = append(out.events, event{true, c.Key, "Conflict", fmt.Sprintf(
				"declared in %s:%d (wins) and also in %s", decl.File, decl.Line, strings.Join(decl.Conflicts, ", "))})
		}
	}
}

// confirmEmpty releases a hold, deleting every object the directory no
// longer declares. It reports whether there was a hold.
func (d *declarations) confirmEmpty() (outcome, bool) {
	var out outcome
	if !d.held {
		return out, false
	}
	d.held = false
	for k := range d.declared {
		if d.desired[k] == nil {
			delete(d.declared, k)
			out.changes = append(out.changes, Change{Key: k})
		}
	}
	slices.SortFunc(out.changes, func(a, b Change) int { return reconcile.CompareKeys(a.Key, b.Key) })
	out.events = append(out.events, event{false, d.origin.Key, "EmptyConfirmed", fmt.Sprintf(
		"emptying of %s confirmed; %d objects deleted", d.origin.Name, len(out.changes))})
	return out, true
}

// fileEvent is the event, if any, of a file that declares no object and
// starts or stops failing. The objects of a failing file get an Invalid
// condition from their controllers, with its own event; a file with none
// has only its origin to be reported against, or the object it stands
// for when the origin names one.
func (d *declarations) fileEvent(rel string, old, fresh *unitState) (event, bool) {
	if len(fresh.good) > 0 {
		return event{}, false
	}
	switch {
	case len(fresh.errs) > 0:
		msg := fresh.errs[0].Error()
		if n := len(fresh.errs) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more)", n)
		}
		return event{true, d.origin.unitKey(rel), "Invalid", msg}, true
	case old != nil && len(old.errs) > 0:
		return event{false, d.origin.unitKey(rel), "Valid", rel + " loads again"}, true
	}
	return event{}, false
}

// errors returns the current load errors of every file, sorted.
func (d *declarations) errors() []*loader.Error {
	var errs []*loader.Error
	for _, f := range d.files {
		errs = append(errs, f.errs...)
	}
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].File != errs[j].File {
			return errs[i].File < errs[j].File
		}
		return errs[i].Line < errs[j].Line
	})
	return errs
}

// keysIn returns the keys of the objects file declares (its last good
// version), in document order.
func (d *declarations) keysIn(file string) []reconcile.Key {
	f := d.files[file]
	if f == nil {
		return nil
	}
	keys := make([]reconcile.Key, len(f.good))
	for i, o := range f.good {
		keys[i] = keyOf(o)
	}
	return keys
}

// keys returns the declared keys of kind, sorted.
func (d *declarations) keys(kind string) []reconcile.Key {
	var keys []reconcile.Key
	for k := range d.declared {
		if k.Kind == kind {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, reconcile.CompareKeys)
	return keys
}

func keyOf(o loader.Object) reconcile.Key {
	return reconcile.Key{Kind: o.GetTypeMeta().Kind, Name: o.GetObjectMeta().Name}
}

func declLess(a, b declRef) bool {
	if a.file != b.file {
		return a.file < b.file
	}
	return a.obj.Line < b.obj.Line
}

func declEqual(a, b *Declaration) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.File == b.File && a.Line == b.Line &&
		reflect.DeepEqual(a.Invalid, b.Invalid) && slices.Equal(a.Conflicts, b.Conflicts) &&
		reflect.DeepEqual(a.Object, b.Object)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
