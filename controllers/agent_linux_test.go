package controllers_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// A scope with a real child gets an agent status; when the child exits,
// the emptied scope is removed and the status goes with it.
func TestAgentFollowsItsScope(t *testing.T) { controllers.OnEachKernel(t, testAgentFollowsItsScope) }

func testAgentFollowsItsScope(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{})
	h.declare(profile("coder", "", nil))
	h.start()
	c, sc := h.inScope("coder")
	key := controllers.AgentKey(sc.Name)

	var st v1alpha1.AgentStatus
	h.waitFor("agent status of "+sc.Name, func() bool {
		st, _ = h.s.Agents.Get(key)
		return st.Populated
	})
	if st.Profile != "coder" || st.ID != sc.ID || st.Path != sc.Path || st.Since.IsZero() {
		t.Errorf("agent status = %+v, want profile coder, id %s, path %s, since set", st, sc.ID, sc.Path)
	}
	if len(st.Conditions) != 0 {
		t.Errorf("conditions of an agent of a declared profile = %+v, want none", st.Conditions)
	}
	h.waitFor("profile counts the agent", func() bool {
		ps, _ := h.s.Profiles.Get(controllers.ProfileKey("coder"))
		return ps.Agents == 1
	})

	c.Kill()
	c.Wait(t)
	h.waitFor("agent status gone", func() bool {
		_, ok := h.s.Agents.Get(key)
		return !ok
	})
	if exists(h.scopeDir(sc)) {
		t.Errorf("emptied scope %s was not removed", sc.Path)
	}
	h.waitFor("profile counts no agent", func() bool {
		ps, _ := h.s.Profiles.Get(controllers.ProfileKey("coder"))
		return ps.Agents == 0
	})
	if evs := h.events(key); len(evs) != 0 {
		t.Errorf("events of an agent that came and went = %v, want none", reasons(evs))
	}
}

// At start-up, scopes that are already empty are removed, a live scope of
// a profile that is not declared is kept and reported Orphaned once, the
// slice of an undeclared profile left empty is removed, and a stale store
// entry is dropped.
func TestStartupGarbageCollection(t *testing.T) {
	controllers.OnEachKernel(t, testStartupGarbageCollection)
}

func testStartupGarbageCollection(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{})
	ctx := t.Context()
	emptied := func(profile string) cgroup.Scope {
		c, sc := h.inScope(profile)
		c.Kill()
		c.Wait(t)
		if _, err := cgroup.WaitEvents(ctx, h.scopeDir(sc), func(e cgroup.GroupEvents) bool { return !e.Populated }); err != nil {
			t.Fatal(err)
		}
		return sc
	}
	emptyDeclared := emptied("coder")
	emptyUndeclared := emptied("stale")
	ghost, live := h.inScope("ghost")
	stale := controllers.AgentKey(scope.ScopeName("coder", scope.NewID()))
	h.s.Scopes.Set(stale, cgroup.Scope{Name: stale.Name, Profile: "coder"})
	h.declare(profile("coder", "", nil))

	h.start()
	h.waitFor("only the live orphan is left", func() bool {
		keys := h.s.Scopes.Keys()
		return len(keys) == 1 && keys[0] == controllers.AgentKey(live.Name)
	})
	for _, sc := range []cgroup.Scope{emptyDeclared, emptyUndeclared} {
		if exists(h.scopeDir(sc)) {
			t.Errorf("empty scope %s was not collected", sc.Path)
		}
	}
	key := controllers.AgentKey(live.Name)
	h.waitFor("the live orphan is reported", func() bool {
		st, _ := h.s.Agents.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionOrphaned).Status == v1alpha1.ConditionTrue
	})
	if ghost.Exited() {
		t.Error("the orphan was stopped; an undeclared profile's agents are kept")
	}
	evs := h.events(key)
	if got, want := reasons(evs), []string{"Warning:Orphaned"}; !equalStrings(got, want) || evs[0].Count != 1 {
		t.Errorf("orphan events = %v, want one Warning Orphaned", evs)
	}
	h.waitForGone(h.slicePath("stale"))
	if !exists(h.slicePath("ghost")) {
		t.Error("the slice of the live orphan was removed")
	}

	// Declaring its profile adopts the orphan: one Normal event.
	h.declare(profile("ghost", "", nil))
	h.waitFor("the orphan adopted", func() bool {
		st, _ := h.s.Agents.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionOrphaned).Status == v1alpha1.ConditionFalse
	})
	if got, want := reasons(h.events(key)), []string{"Warning:Orphaned", "Normal:ProfileDeclared"}; !equalStrings(got, want) {
		t.Errorf("orphan events = %v, want %v", got, want)
	}
}

// waitForGone waits until path is removed, woken by inotify on its
// parent directory.
func (h *harness) waitForGone(path string) {
	h.t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		h.t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.t.Fatal(err)
	}
	testutil.Eventually(h.t, w.Events, func() bool { return !exists(path) }, path+" removed")
}
