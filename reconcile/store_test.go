package reconcile_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

func akey(name string) reconcile.Key { return reconcile.Key{Kind: v1alpha1.KindAgent, Name: name} }

func TestStoreSetGetDeleteList(t *testing.T) {
	s := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentUsage]{})
	var r recorder
	s.OnChange(r.handle)

	steps := []struct {
		name    string
		do      func() bool
		changed bool
	}{
		{name: "set_new", do: func() bool { return s.Set(akey("b"), v1alpha1.AgentUsage{Tasks: 3}) }, changed: true},
		{name: "set_equal", do: func() bool { return s.Set(akey("b"), v1alpha1.AgentUsage{Tasks: 3}) }, changed: false},
		{name: "set_other", do: func() bool { return s.Set(akey("a"), v1alpha1.AgentUsage{Tasks: 1}) }, changed: true},
		{name: "set_different", do: func() bool { return s.Set(akey("b"), v1alpha1.AgentUsage{Tasks: 4}) }, changed: true},
		{name: "delete", do: func() bool { return s.Delete(akey("a")) }, changed: true},
		{name: "delete_missing", do: func() bool { return s.Delete(akey("a")) }, changed: false},
	}
	for _, st := range steps {
		if got := st.do(); got != st.changed {
			t.Errorf("%s = %v, want %v", st.name, got, st.changed)
		}
	}
	if want := []reconcile.Key{akey("b"), akey("a"), akey("b"), akey("a")}; !slices.Equal(r.got(), want) {
		t.Errorf("handler got %v, want %v", r.got(), want)
	}
	if v, ok := s.Get(akey("b")); !ok || v.Tasks != 4 {
		t.Errorf("Get(b) = %+v, %v; want Tasks 4", v, ok)
	}
	if _, ok := s.Get(akey("a")); ok {
		t.Error("Get(a) found a deleted key")
	}
	s.Set(akey("c"), v1alpha1.AgentUsage{})
	if got, want := s.Keys(), []reconcile.Key{akey("b"), akey("c")}; !slices.Equal(got, want) {
		t.Errorf("Keys() = %v, want %v", got, want)
	}
	l := s.List()
	if len(l) != 2 || l[0].Key != akey("b") || l[0].Value.Tasks != 4 || l[1].Key != akey("c") {
		t.Errorf("List() = %+v, want b (Tasks 4), c", l)
	}
	if s.Len() != 2 {
		t.Errorf("Len() = %d, want 2", s.Len())
	}
}

// A value with slices is copied in and out: callers cannot reach what the
// store holds.
func TestStoreCopiesReferenceValues(t *testing.T) {
	s := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.ProfileStatus]{})
	in := v1alpha1.ProfileStatus{
		Status: v1alpha1.Status{ObservedGeneration: 2, Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue}}},
		Limits: []v1alpha1.LimitStatus{{Resource: "pids", Requested: 10, Applied: 10}},
	}
	s.Set(pkey("p"), in)
	in.Conditions[0].Status = v1alpha1.ConditionFalse
	in.Limits[0].Applied = 0

	got, _ := s.Get(pkey("p"))
	if got.Conditions[0].Status != v1alpha1.ConditionTrue || got.Limits[0].Applied != 10 {
		t.Fatalf("changing the value after Set changed the store: %+v", got)
	}
	got.Conditions[0].Status = v1alpha1.ConditionUnknown
	for _, e := range s.List() {
		e.Value.Limits[0].Applied = 1
	}
	again, _ := s.Get(pkey("p"))
	if again.Conditions[0].Status != v1alpha1.ConditionTrue || again.Limits[0].Applied != 10 {
		t.Errorf("changing values from Get and List changed the store: %+v", again)
	}
}

// Equal decides what counts as a change: here, a new reading time alone
// is not one.
func TestStoreCustomEqual(t *testing.T) {
	type reading struct {
		Tasks int64
		At    time.Time
	}
	s := reconcile.NewStore(reconcile.StoreOptions[reading]{
		Equal: func(a, b reading) bool { return a.Tasks == b.Tasks },
	})
	if !s.Set(akey("x"), reading{Tasks: 1, At: epoch}) {
		t.Error("first Set reported no change")
	}
	if s.Set(akey("x"), reading{Tasks: 1, At: epoch.Add(time.Second)}) {
		t.Error("Set with only a new time reported a change")
	}
	if !s.Set(akey("x"), reading{Tasks: 2, At: epoch}) {
		t.Error("Set with new tasks reported no change")
	}
}

// Two writers sharing one value through Update lose none of each other's
// changes.
func TestStoreUpdateIsAtomic(t *testing.T) {
	type shared struct{ A, B int }
	s := reconcile.NewStore(reconcile.StoreOptions[shared]{})
	const n = 1000
	var wg sync.WaitGroup
	for _, field := range []func(*shared){func(v *shared) { v.A++ }, func(v *shared) { v.B++ }} {
		wg.Go(func() {
			for range n {
				s.Update(pkey("p"), func(v shared, _ bool) (shared, bool) {
					field(&v)
					return v, true
				})
			}
		})
	}
	wg.Wait()
	if v, _ := s.Get(pkey("p")); v != (shared{n, n}) {
		t.Errorf("after %d updates by each writer: %+v, want {A:%d B:%d}", n, v, n, n)
	}
}

func TestStoreUpdate(t *testing.T) {
	s := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.WorkspaceStatus]{})
	var r recorder
	s.OnChange(r.handle)
	ready := v1alpha1.Condition{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue}
	invalid := v1alpha1.Condition{Type: v1alpha1.ConditionInvalid, Status: v1alpha1.ConditionTrue}
	setCondition := func(c v1alpha1.Condition) func(v1alpha1.WorkspaceStatus, bool) (v1alpha1.WorkspaceStatus, bool) {
		return func(v v1alpha1.WorkspaceStatus, _ bool) (v1alpha1.WorkspaceStatus, bool) {
			i := slices.IndexFunc(v.Conditions, func(x v1alpha1.Condition) bool { return x.Type == c.Type })
			if i < 0 {
				v.Conditions = append(v.Conditions, c)
			} else {
				v.Conditions[i] = c
			}
			return v, true
		}
	}
	steps := []struct {
		name    string
		fn      func(v1alpha1.WorkspaceStatus, bool) (v1alpha1.WorkspaceStatus, bool)
		changed bool
		conds   []string
	}{
		{name: "absent_stays_absent", fn: func(v v1alpha1.WorkspaceStatus, ok bool) (v1alpha1.WorkspaceStatus, bool) {
			return v, false
		}, changed: false},
		{name: "create", fn: setCondition(ready), changed: true, conds: []string{"Ready"}},
		{name: "same_again", fn: setCondition(ready), changed: false, conds: []string{"Ready"}},
		{name: "second_writer_adds", fn: setCondition(invalid), changed: true, conds: []string{"Ready", "Invalid"}},
		{name: "delete", fn: func(v v1alpha1.WorkspaceStatus, ok bool) (v1alpha1.WorkspaceStatus, bool) {
			if !ok {
				t.Error("Update of a stored key got ok = false")
			}
			return v, false
		}, changed: true},
	}
	for _, st := range steps {
		if got := s.Update(wkey("w"), st.fn); got != st.changed {
			t.Errorf("%s: changed = %v, want %v", st.name, got, st.changed)
		}
		v, _ := s.Get(wkey("w"))
		var conds []string
		for _, c := range v.Conditions {
			conds = append(conds, c.Type)
		}
		if !slices.Equal(conds, st.conds) {
			t.Errorf("%s: conditions = %v, want %v", st.name, conds, st.conds)
		}
	}
	if want := []reconcile.Key{wkey("w"), wkey("w"), wkey("w")}; !slices.Equal(r.got(), want) {
		t.Errorf("handler got %v, want %v", r.got(), want)
	}
}

// An index on an observed store maps a Workspace to its live agents.
func TestStoreIndex(t *testing.T) {
	s := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentStatus]{})
	s.Set(akey("a1"), v1alpha1.AgentStatus{Workspace: "web"})
	byWorkspace := s.AddIndex(func(_ reconcile.Key, a v1alpha1.AgentStatus) []reconcile.Key {
		if a.Workspace == "" {
			return nil
		}
		return []reconcile.Key{wkey(a.Workspace)}
	})
	s.Set(akey("a2"), v1alpha1.AgentStatus{Workspace: "web"})
	s.Set(akey("a3"), v1alpha1.AgentStatus{})
	if got, want := byWorkspace.Referrers(wkey("web")), []reconcile.Key{akey("a1"), akey("a2")}; !slices.Equal(got, want) {
		t.Errorf("Referrers(web) = %v, want %v", got, want)
	}
	s.Update(akey("a3"), func(a v1alpha1.AgentStatus, _ bool) (v1alpha1.AgentStatus, bool) {
		a.Workspace = "web"
		return a, true
	})
	s.Delete(akey("a1"))
	if got, want := byWorkspace.Referrers(wkey("web")), []reconcile.Key{akey("a2"), akey("a3")}; !slices.Equal(got, want) {
		t.Errorf("after update and delete: Referrers(web) = %v, want %v", got, want)
	}
}

// A store of a type that holds references copies it with its
// DeepCopyInto, or with the Clone it is given; without either, NewStore
// refuses it rather than share memory with its callers.
func TestStoreCopiesOrRefuses(t *testing.T) {
	type refs struct{ Names []string }
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("NewStore of a type with a slice and no DeepCopyInto did not panic")
			}
		}()
		reconcile.NewStore(reconcile.StoreOptions[refs]{})
	}()
	s := reconcile.NewStore(reconcile.StoreOptions[refs]{Clone: func(v refs) refs { return refs{slices.Clone(v.Names)} }})
	in := refs{Names: []string{"a"}}
	s.Set(pkey("p"), in)
	in.Names[0] = "changed"
	if got, _ := s.Get(pkey("p")); got.Names[0] != "a" {
		t.Errorf("the store shares the slice it was given: %v", got.Names)
	}

	st := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.ProfileStatus]{})
	ps := v1alpha1.ProfileStatus{Limits: []v1alpha1.LimitStatus{{Resource: "cpu"}}}
	st.Set(pkey("p"), ps)
	got, _ := st.Get(pkey("p"))
	got.Limits[0].Resource = "changed"
	if again, _ := st.Get(pkey("p")); again.Limits[0].Resource != "cpu" {
		t.Errorf("the store shares what Get returned: %v", again.Limits)
	}
}
