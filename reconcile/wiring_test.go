package reconcile_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// keyLog is a Reconciler that records the keys it is asked for.
type keyLog struct {
	mu   sync.Mutex
	keys []reconcile.Key
}

func (l *keyLog) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, req.Key)
	return reconcile.Result{}, nil
}

// take returns the recorded keys, sorted, and forgets them.
func (l *keyLog) take() []reconcile.Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys
	l.keys = nil
	slices.SortFunc(k, reconcile.CompareKeys)
	return k
}

// Stores wired to controllers as the package documentation shows: each
// change reaches exactly the controllers and keys it concerns.
func TestStoreChangesReachExactlyTheirKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := reconcile.NewDesiredStore()
		var profiles, workspaces keyLog
		pc := newController(t, &profiles, reconcile.Options{Workers: 2})
		wc := newController(t, &workspaces, reconcile.Options{Workers: 2})

		d.OnChange(reconcile.ForKind(v1alpha1.KindProfile, reconcile.EnqueueKey(pc)))
		d.OnChange(reconcile.ForKind(v1alpha1.KindWorkspace, reconcile.EnqueueKey(wc)))
		byProfile := d.AddIndex(func(o v1alpha1.Object) []reconcile.Key {
			if w, ok := o.(*v1alpha1.Workspace); ok {
				return []reconcile.Key{pkey(w.Spec.Profile)}
			}
			return nil
		})
		d.OnChange(reconcile.ForKind(v1alpha1.KindProfile, reconcile.EnqueueMapped(wc, byProfile.Referrers)))

		for _, o := range []v1alpha1.Object{
			profile("p"), profile("q"),
			workspace("w1", "p"), workspace("w2", "p"), workspace("w3", "q"),
		} {
			mustSet(t, d, o)
		}
		start(t, pc)
		start(t, wc)
		synctest.Wait()
		if got, want := profiles.take(), []reconcile.Key{pkey("p"), pkey("q")}; !slices.Equal(got, want) {
			t.Errorf("initial profiles reconciled = %v, want %v", got, want)
		}
		if got, want := workspaces.take(), []reconcile.Key{wkey("w1"), wkey("w2"), wkey("w3")}; !slices.Equal(got, want) {
			t.Errorf("initial workspaces reconciled = %v, want %v", got, want)
		}

		steps := []struct {
			name           string
			change         func()
			wantProfiles   []reconcile.Key
			wantWorkspaces []reconcile.Key
		}{
			{name: "profile_spec_change",
				change:         func() { mustSet(t, d, profile("p", withTasks(64))) },
				wantProfiles:   []reconcile.Key{pkey("p")},
				wantWorkspaces: []reconcile.Key{wkey("w1"), wkey("w2")}},
			{name: "unchanged_set",
				change: func() { mustSet(t, d, profile("p", withTasks(64))) }},
			{name: "workspace_moves",
				change:         func() { mustSet(t, d, workspace("w2", "q")) },
				wantWorkspaces: []reconcile.Key{wkey("w2")}},
			{name: "profile_deleted",
				change:         func() { d.Delete(pkey("q")) },
				wantProfiles:   []reconcile.Key{pkey("q")},
				wantWorkspaces: []reconcile.Key{wkey("w2"), wkey("w3")}},
			{name: "workspace_deleted",
				change:         func() { d.Delete(wkey("w1")) },
				wantWorkspaces: []reconcile.Key{wkey("w1")}},
		}
		for _, st := range steps {
			st.change()
			synctest.Wait()
			if got := profiles.take(); !slices.Equal(got, st.wantProfiles) {
				t.Errorf("%s: profiles reconciled = %v, want %v", st.name, got, st.wantProfiles)
			}
			if got := workspaces.take(); !slices.Equal(got, st.wantWorkspaces) {
				t.Errorf("%s: workspaces reconciled = %v, want %v", st.name, got, st.wantWorkspaces)
			}
		}
	})
}
