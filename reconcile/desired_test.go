package reconcile_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

func profile(name string, mods ...func(*v1alpha1.Profile)) *v1alpha1.Profile {
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = name
	for _, m := range mods {
		m(p)
	}
	p.Default()
	return p
}

func workspace(name, profile string, mods ...func(*v1alpha1.Workspace)) *v1alpha1.Workspace {
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata.Name = name
	w.Spec.Root = "/src/" + name
	w.Spec.Profile = profile
	for _, m := range mods {
		m(w)
	}
	w.Default()
	return w
}

func pkey(name string) reconcile.Key { return reconcile.Key{Kind: v1alpha1.KindProfile, Name: name} }
func wkey(name string) reconcile.Key { return reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: name} }

func withTasks(n int64) func(*v1alpha1.Profile) {
	return func(p *v1alpha1.Profile) { p.Spec.Limits = &v1alpha1.Limits{Tasks: &n} }
}

func withLabels(kv ...string) func(*v1alpha1.Profile) {
	return func(p *v1alpha1.Profile) {
		p.Metadata.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Metadata.Labels[kv[i]] = kv[i+1]
		}
	}
}

// Each case applies its steps in order to a fresh store and checks what
// every step reported and the generation stored after it.
func TestDesiredStoreGeneration(t *testing.T) {
	type step struct {
		set     *v1alpha1.Profile // nil: delete "p"
		changed bool
		gen     int64 // 0: the object is gone
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "new_object_starts_at_1", steps: []step{
			{set: profile("p"), changed: true, gen: 1},
		}},
		{name: "equal_spec_keeps_generation_and_reports_no_change", steps: []step{
			{set: profile("p", withTasks(8)), changed: true, gen: 1},
			{set: profile("p", withTasks(8)), changed: false, gen: 1},
			{set: profile("p", withTasks(8)), changed: false, gen: 1},
		}},
		{name: "spec_change_increments", steps: []step{
			{set: profile("p", withTasks(8)), changed: true, gen: 1},
			{set: profile("p", withTasks(9)), changed: true, gen: 2},
			{set: profile("p", withTasks(8)), changed: true, gen: 3},
			{set: profile("p"), changed: true, gen: 4},
		}},
		{name: "label_change_is_a_change_without_new_generation", steps: []step{
			{set: profile("p", withLabels("team", "a")), changed: true, gen: 1},
			{set: profile("p", withLabels("team", "b")), changed: true, gen: 1},
			{set: profile("p"), changed: true, gen: 1},
			{set: profile("p", withLabels()), changed: false, gen: 1}, // empty labels equal none
		}},
		{name: "status_given_to_set_is_ignored", steps: []step{
			{set: profile("p"), changed: true, gen: 1},
			{set: profile("p", func(p *v1alpha1.Profile) {
				p.Status.ObservedGeneration = 7
				p.Status.Conditions = []v1alpha1.Condition{{Type: "Ready", Status: v1alpha1.ConditionTrue}}
			}), changed: false, gen: 1},
		}},
		{name: "declared_generation_is_ignored_for_existing_key", steps: []step{
			{set: profile("p"), changed: true, gen: 1},
			{set: profile("p", func(p *v1alpha1.Profile) { p.Metadata.Generation = 40 }), changed: false, gen: 1},
			{set: profile("p", withTasks(1), func(p *v1alpha1.Profile) { p.Metadata.Generation = 40 }), changed: true, gen: 2},
		}},
		{name: "declared_generation_is_ignored_for_new_key", steps: []step{
			{set: profile("p", func(p *v1alpha1.Profile) { p.Metadata.Generation = 12 }), changed: true, gen: 1},
			{set: profile("p", withTasks(1)), changed: true, gen: 2},
		}},
		{name: "delete_then_set_starts_again", steps: []step{
			{set: profile("p"), changed: true, gen: 1},
			{set: profile("p", withTasks(3)), changed: true, gen: 2},
			{set: nil, changed: true, gen: 0},
			{set: nil, changed: false, gen: 0},
			{set: profile("p", withTasks(3)), changed: true, gen: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := reconcile.NewDesiredStore()
			for i, s := range tc.steps {
				var changed bool
				if s.set == nil {
					changed = d.Delete(pkey("p"))
				} else {
					var err error
					if changed, err = d.Set(s.set); err != nil {
						t.Fatalf("step %d: Set: %v", i, err)
					}
				}
				if changed != s.changed {
					t.Errorf("step %d: changed = %v, want %v", i, changed, s.changed)
				}
				obj, ok := d.Get(pkey("p"))
				switch {
				case s.gen == 0 && ok:
					t.Errorf("step %d: Get found %v, want nothing", i, obj)
				case s.gen != 0 && !ok:
					t.Errorf("step %d: Get found nothing, want generation %d", i, s.gen)
				case ok:
					if g := obj.GetObjectMeta().Generation; g != s.gen {
						t.Errorf("step %d: generation = %d, want %d", i, g, s.gen)
					}
					if st := obj.(*v1alpha1.Profile).Status; !reflect.ValueOf(st).IsZero() {
						t.Errorf("step %d: stored status = %+v, want zero", i, st)
					}
				}
			}
		})
	}
}

// A count saved by an earlier run goes on where it stopped: the same
// generation for the spec it counted, the next for another; a stored key
// or a deleted one does not take it.
func TestDesiredStoreRestore(t *testing.T) {
	sumOf := func(t *testing.T, p *v1alpha1.Profile) reconcile.SpecSum {
		t.Helper()
		d := reconcile.NewDesiredStore()
		mustSet(t, d, p)
		g, ok := d.GenerationOf(reconcile.KeyOf(p))
		if !ok || g.Generation != 1 {
			t.Fatalf("GenerationOf a new key = %+v, %v", g, ok)
		}
		return g.Spec
	}
	counted := sumOf(t, profile("p", withTasks(8)))
	if other := sumOf(t, profile("p", withTasks(9))); other == counted {
		t.Fatal("two specs have one sum")
	}
	restore := func(d *reconcile.DesiredStore) {
		d.Restore(pkey("p"), reconcile.Generation{Generation: 12, Spec: counted})
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, d *reconcile.DesiredStore)
		set     *v1alpha1.Profile
		want    int64
	}{
		{name: "same_spec_keeps_the_count", set: profile("p", withTasks(8)), want: 12,
			prepare: func(t *testing.T, d *reconcile.DesiredStore) { restore(d) }},
		{name: "other_spec_counts_one_more", set: profile("p", withTasks(9)), want: 13,
			prepare: func(t *testing.T, d *reconcile.DesiredStore) { restore(d) }},
		{name: "a_stored_key_ignores_it", set: profile("p", withTasks(9)), want: 2,
			prepare: func(t *testing.T, d *reconcile.DesiredStore) {
				mustSet(t, d, profile("p", withTasks(8)))
				restore(d)
			}},
		{name: "delete_forgets_it", set: profile("p", withTasks(8)), want: 1,
			prepare: func(t *testing.T, d *reconcile.DesiredStore) {
				restore(d)
				d.Delete(pkey("p"))
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := reconcile.NewDesiredStore()
			tc.prepare(t, d)
			next, err := d.Next(tc.set)
			if err != nil {
				t.Fatal(err)
			}
			mustSet(t, d, tc.set)
			obj, _ := d.Get(pkey("p"))
			g, _ := d.GenerationOf(pkey("p"))
			if obj.GetObjectMeta().Generation != tc.want || g.Generation != tc.want {
				t.Errorf("generation = %d (GenerationOf %d), want %d", obj.GetObjectMeta().Generation, g.Generation, tc.want)
			}
			// Next foretells the count Set gives.
			if next != g {
				t.Errorf("Next before Set = %+v, Set gave %+v", next, g)
			}
			if again, _ := d.Next(tc.set); again != g {
				t.Errorf("Next of the stored spec = %+v, want %+v", again, g)
			}
			// The count is used once: delete and set again starts at 1.
			d.Delete(pkey("p"))
			mustSet(t, d, tc.set)
			if obj, _ := d.Get(pkey("p")); obj.GetObjectMeta().Generation != 1 {
				t.Errorf("after delete, generation = %d, want 1", obj.GetObjectMeta().Generation)
			}
		})
	}
}

// An omitted list or map and an empty one are the same declaration.
func TestDesiredStoreNilAndEmptyAreEqual(t *testing.T) {
	d := reconcile.NewDesiredStore()
	if _, err := d.Set(workspace("w", "p")); err != nil {
		t.Fatal(err)
	}
	empty := workspace("w", "p", func(w *v1alpha1.Workspace) {
		w.Spec.Exec.Env = map[string]string{}
		w.Spec.Exec.Argv0 = []string{}
	})
	if changed, err := d.Set(empty); err != nil || changed {
		t.Errorf("Set(empty env and argv0 after omitted) = %v, %v; want false, nil", changed, err)
	}
	full := workspace("w", "p", func(w *v1alpha1.Workspace) { w.Spec.Exec.Env = map[string]string{"A": "1"} })
	if changed, _ := d.Set(full); !changed {
		t.Error("Set(env A=1) reported no change")
	}
}

func TestDesiredStoreSetRejectsInvalidObjects(t *testing.T) {
	type wrapped struct{ v1alpha1.Object } // what a loader result looks like
	tests := []struct {
		name string
		obj  v1alpha1.Object
	}{
		{name: "nil", obj: nil},
		{name: "nil_pointer", obj: (*v1alpha1.Profile)(nil)},
		{name: "no_name", obj: profile("")},
		{name: "no_kind", obj: &v1alpha1.Profile{Metadata: v1alpha1.ObjectMeta{Name: "p"}}},
		{name: "not_a_pointer", obj: wrapped{profile("p")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := reconcile.NewDesiredStore()
			changed, err := d.Set(tc.obj)
			if !errors.Is(err, reconcile.ErrInvalidObject) || changed {
				t.Errorf("Set(%#v) = %v, %v; want false, ErrInvalidObject", tc.obj, changed, err)
			}
			if d.Len() != 0 {
				t.Errorf("Len() = %d after a rejected Set, want 0", d.Len())
			}
		})
	}
}

// Nothing a caller does to an object it gave to Set or got from Get or
// List changes the store: every reference in every field of every kind is
// mutated and the store is compared with what was set.
func TestDesiredStoreCopiesEveryField(t *testing.T) {
	for _, kind := range v1alpha1.Kinds {
		t.Run(kind, func(t *testing.T) {
			d := reconcile.NewDesiredStore()
			in := v1alpha1.New(kind)
			fill(reflect.ValueOf(in).Elem(), 1)
			in.GetObjectMeta().Name = "x"
			in.GetObjectMeta().Generation = 0
			clearStatus(in)
			want := snapshotJSON(t, in)
			if _, err := d.Set(in); err != nil {
				t.Fatal(err)
			}
			key := reconcile.KeyOf(in)

			mutateRefs(reflect.ValueOf(in).Elem())
			got, _ := d.Get(key)
			got.GetObjectMeta().Generation = 0
			if s := snapshotJSON(t, got); s != want {
				t.Fatalf("changing the object after Set changed the store:\n got %s\nwant %s", s, want)
			}
			mutateRefs(reflect.ValueOf(got).Elem())
			for _, o := range d.List(kind) {
				mutateRefs(reflect.ValueOf(o).Elem())
			}
			again, _ := d.Get(key)
			again.GetObjectMeta().Generation = 0
			if s := snapshotJSON(t, again); s != want {
				t.Fatalf("changing objects from Get and List changed the store:\n got %s\nwant %s", s, want)
			}
		})
	}
}

func clearStatus(o v1alpha1.Object) {
	reflect.ValueOf(o).Elem().FieldByName("Status").SetZero()
}

func snapshotJSON(t *testing.T, o v1alpha1.Object) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fill sets every exported field reachable from v to a non-zero value
// derived from seed, allocating pointers, slices and maps.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), seed+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(seed), 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed+i+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), seed+i)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, seed)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, seed+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", seed))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(seed))
	}
}

// mutateRefs changes every value reachable from v through a pointer,
// slice or map: exactly what a shallow copy would share.
func mutateRefs(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutateAll(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutateRefs(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			mutateAll(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutateAll(e)
			v.SetMapIndex(k, e)
		}
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, 999)
		v.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
	}
}

// mutateAll changes v and everything below it.
func mutateAll(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		mutateRefs(v)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(424242, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutateAll(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString(v.String() + "-changed")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1000)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1000)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1000)
	}
}

func TestDesiredStoreListAndKeys(t *testing.T) {
	d := reconcile.NewDesiredStore()
	for _, o := range []v1alpha1.Object{profile("b"), workspace("w", "b"), profile("a"), profile("c")} {
		if _, err := d.Set(o); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, o := range d.List(v1alpha1.KindProfile) {
		names = append(names, o.GetObjectMeta().Name)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(names, want) {
		t.Errorf("List(Profile) names = %v, want %v", names, want)
	}
	if got, want := d.Keys(v1alpha1.KindWorkspace), []reconcile.Key{wkey("w")}; !slices.Equal(got, want) {
		t.Errorf("Keys(Workspace) = %v, want %v", got, want)
	}
	if got := d.Keys(v1alpha1.KindHost); len(got) != 0 {
		t.Errorf("Keys(Host) = %v, want none", got)
	}
	if d.Len() != 4 {
		t.Errorf("Len() = %d, want 4", d.Len())
	}
}

// recorder is a Handler that records keys, and may look into the store
// while it is called.
type recorder struct {
	mu   sync.Mutex
	keys []reconcile.Key
}

func (r *recorder) handle(k reconcile.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, k)
}

func (r *recorder) got() []reconcile.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

// A change calls each handler once, with that key only, however many
// objects the store holds; a Set that changes nothing calls none.
func TestDesiredStoreNotifiesOnlyTheChangedKey(t *testing.T) {
	d := reconcile.NewDesiredStore()
	for i := range 1000 {
		if _, err := d.Set(workspace(fmt.Sprintf("w%d", i), "p")); err != nil {
			t.Fatal(err)
		}
	}
	var r recorder
	remove := d.OnChange(r.handle)

	mustSet(t, d, workspace("w500", "q")) // spec change
	mustSet(t, d, workspace("w500", "q")) // no change
	mustSet(t, d, profile("p"))           // new object
	d.Delete(wkey("w7"))                  // delete
	d.Delete(wkey("w7"))                  // nothing to delete
	want := []reconcile.Key{wkey("w500"), pkey("p"), wkey("w7")}
	if got := r.got(); !slices.Equal(got, want) {
		t.Errorf("handler got %v, want %v", got, want)
	}

	remove()
	mustSet(t, d, profile("p", withTasks(1)))
	if got := r.got(); len(got) != len(want) {
		t.Errorf("handler called after removal: %v", got)
	}
}

func mustSet(t *testing.T, d *reconcile.DesiredStore, o v1alpha1.Object) {
	t.Helper()
	if _, err := d.Set(o); err != nil {
		t.Fatal(err)
	}
}

// A handler runs after the change is visible and may read the store
// without deadlocking.
func TestDesiredStoreHandlerSeesTheChange(t *testing.T) {
	d := reconcile.NewDesiredStore()
	var seen []int64
	d.OnChange(func(k reconcile.Key) {
		if o, ok := d.Get(k); ok {
			seen = append(seen, o.GetObjectMeta().Generation)
		} else {
			seen = append(seen, 0)
		}
	})
	mustSet(t, d, profile("p"))
	mustSet(t, d, profile("p", withTasks(2)))
	d.Delete(pkey("p"))
	if want := []int64{1, 2, 0}; !slices.Equal(seen, want) {
		t.Errorf("generations seen by the handler = %v, want %v", seen, want)
	}
}

// The index follows each Workspace's profile as it is set, changed and
// deleted, and covers objects stored before it was added.
func TestDesiredStoreIndex(t *testing.T) {
	d := reconcile.NewDesiredStore()
	mustSet(t, d, workspace("early", "p"))
	byProfile := d.AddIndex(func(o v1alpha1.Object) []reconcile.Key {
		if w, ok := o.(*v1alpha1.Workspace); ok {
			return []reconcile.Key{pkey(w.Spec.Profile)}
		}
		return nil
	})
	mustSet(t, d, workspace("w1", "p"))
	mustSet(t, d, workspace("w2", "q"))
	mustSet(t, d, profile("p"))
	check := func(step, profile string, want ...reconcile.Key) {
		t.Helper()
		if got := byProfile.Referrers(pkey(profile)); !slices.Equal(got, want) {
			t.Errorf("%s: Referrers(%s) = %v, want %v", step, profile, got, want)
		}
	}
	check("initial", "p", wkey("early"), wkey("w1"))
	check("initial", "q", wkey("w2"))

	mustSet(t, d, workspace("w1", "q"))
	check("after w1 moves to q", "p", wkey("early"))
	check("after w1 moves to q", "q", wkey("w1"), wkey("w2"))

	d.Delete(wkey("w2"))
	check("after w2 is deleted", "q", wkey("w1"))
	if got := byProfile.Targets(pkey("p")); len(got) != 0 {
		t.Errorf("a Profile references %v, want nothing", got)
	}
}
