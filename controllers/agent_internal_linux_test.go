package controllers

import (
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/reconcile"
)

// A scope that was never populated is what a launch looks like between
// creating its scope and moving its process in: it is left alone for the
// grace, measured on the controller's clock, and removed after it. One
// found empty at start-up is removed at once.
func TestEmptyScopeGrace(t *testing.T) { OnEachKernel(t, testEmptyScopeGrace) }

func testEmptyScopeGrace(t *testing.T, k Kernel) {
	backend := k.Backend
	rec, err := events.New(events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := NewStores()
	e := &env{s: s, backend: backend, rec: rec, clock: clk, interval: time.Minute,
		log: slog.New(slog.DiscardHandler), profiles: newProfileMemory()}
	const grace = 10 * time.Second
	r := newAgentReconciler(e, grace)

	// Two scopes made as a launch begins one: the group, no process yet.
	fresh, leftover := scope.ScopeName("coder", scope.NewID()), scope.ScopeName("coder", scope.NewID())
	for _, name := range []string{fresh, leftover} {
		if err := k.Mkdir(path.Join(k.Root, scope.RootSlice, scope.SliceName("coder"), name)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := backend.ListScopes(t.Context())
	if err != nil || len(list) != 2 {
		t.Fatalf("ListScopes = %v, %v; want the two scopes", list, err)
	}
	for _, sc := range list {
		s.Scopes.Set(AgentKey(sc.Name), sc)
	}
	leftoverScope, _ := s.Scopes.Get(AgentKey(leftover))
	r.collectAtStart([]reconcile.Entry[cgroup.Scope]{{Key: AgentKey(leftover), Value: leftoverScope}})
	dir := func(name string) string { return k.V2(scope.RootSlice, scope.SliceName("coder"), name) }
	gone := func(name string) bool {
		_, err := os.Stat(dir(name))
		return os.IsNotExist(err)
	}

	steps := []struct {
		name        string
		scope       string
		advance     time.Duration
		wantRequeue time.Duration
		wantGone    bool
	}{
		{name: "leftover_at_start_removed_at_once", scope: leftover, wantGone: true},
		{name: "fresh_kept_for_the_grace", scope: fresh, wantRequeue: grace},
		{name: "fresh_kept_until_the_grace_ends", scope: fresh, advance: grace - time.Second, wantRequeue: time.Second},
		{name: "fresh_removed_after_the_grace", scope: fresh, advance: time.Second, wantGone: true},
	}
	for _, st := range steps {
		clk.Step(st.advance)
		res, err := r.Reconcile(t.Context(), reconcile.Request{Key: AgentKey(st.scope)})
		if err != nil {
			t.Fatalf("%s: Reconcile: %v", st.name, err)
		}
		if res.RequeueAfter != st.wantRequeue || gone(st.scope) != st.wantGone {
			t.Errorf("%s: requeue after %v, removed %v; want %v, %v", st.name, res.RequeueAfter, gone(st.scope),
				st.wantRequeue, st.wantGone)
		}
		if a, ok := s.Agents.Get(AgentKey(st.scope)); !ok || a.Populated || filepath.Base(a.Path) != st.scope {
			t.Errorf("%s: agent status %+v, %v; want the empty scope's", st.name, a, ok)
		}
	}
}
