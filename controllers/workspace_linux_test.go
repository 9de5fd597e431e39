package controllers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
)

// Ready follows the root (watched) and the profile (a change to it enqueues the workspace), with exactly one event
// per flip however many reconciles run in between.
func TestWorkspaceReadyFollowsRootAndProfile(t *testing.T) {
	h := newHarness(t, controllers.FakeKernel(t), harnessOptions{interval: 20 * time.Millisecond})
	root := filepath.Join(t.TempDir(), "webapp")
	h.declare(workspace("webapp", root, "coder"))
	h.start()
	key := controllers.WorkspaceKey("webapp")

	steps := []struct {
		name       string
		change     func()
		status     v1alpha1.ConditionStatus
		reason     string
		message    string // a part of the message
		eventType  v1alpha1.EventType
		generation int64
	}{
		{name: "root_and_profile_missing", change: func() {},
			status: v1alpha1.ConditionFalse, reason: controllers.ReasonRootMissing,
			message: "root " + root + " does not exist; profile coder is not declared", eventType: v1alpha1.EventWarning},
		{name: "root_created", change: func() { mkdir(t, root) },
			status: v1alpha1.ConditionFalse, reason: controllers.ReasonProfileMissing,
			message: "profile coder is not declared", eventType: v1alpha1.EventWarning},
		{name: "profile_declared", change: func() { h.declare(profile("coder", "", nil)) },
			status: v1alpha1.ConditionTrue, reason: controllers.ReasonWorkspaceReady,
			message: "root " + root + " is a directory and profile coder is declared", eventType: v1alpha1.EventNormal},
		{name: "root_replaced_by_a_file", change: func() { replace(t, root, writeFile) },
			status: v1alpha1.ConditionFalse, reason: controllers.ReasonRootNotDirectory,
			message: "root " + root + " is not a directory", eventType: v1alpha1.EventWarning},
		{name: "root_a_directory_again", change: func() { replace(t, root, mkdir) },
			status: v1alpha1.ConditionTrue, reason: controllers.ReasonWorkspaceReady, eventType: v1alpha1.EventNormal},
		{name: "profile_deleted", change: func() { h.s.Desired.Delete(controllers.ProfileKey("coder")) },
			status: v1alpha1.ConditionFalse, reason: controllers.ReasonProfileMissing,
			message: "profile coder is not declared", eventType: v1alpha1.EventWarning},
		{name: "spec_changed_to_a_declared_profile", change: func() {
			h.declare(profile("writer", "", nil))
			h.declare(workspace("webapp", root, "writer"))
		}, status: v1alpha1.ConditionTrue, reason: controllers.ReasonWorkspaceReady, eventType: v1alpha1.EventNormal,
			generation: 2},
	}
	for i, st := range steps {
		st.change()
		var ws v1alpha1.WorkspaceStatus
		h.waitFor(st.name+": Ready "+st.reason, func() bool {
			ws, _ = h.s.Workspaces.Get(key)
			c := cond(ws.Conditions, v1alpha1.ConditionReady)
			return c.Status == st.status && c.Reason == st.reason
		})
		c := cond(ws.Conditions, v1alpha1.ConditionReady)
		if !strings.Contains(c.Message, st.message) {
			t.Errorf("%s: message %q, want it to contain %q", st.name, c.Message, st.message)
		}
		wantGen := max(st.generation, 1)
		if ws.ObservedGeneration != wantGen || c.ObservedGeneration != wantGen {
			t.Errorf("%s: observedGeneration %d (Ready's %d), want %d", st.name, ws.ObservedGeneration, c.ObservedGeneration, wantGen)
		}
		evs := h.events(key)
		if n := occurrences(evs); n != int64(i+1) {
			t.Fatalf("%s: %d events %v, want %d: one per flip", st.name, n, reasons(evs), i+1)
		}
		if last := evs[len(evs)-1]; last.Type != st.eventType || last.Reason != st.reason || last.Message != c.Message {
			t.Errorf("%s: event %s %s %q, want %s %s %q", st.name, last.Type, last.Reason, last.Message,
				st.eventType, st.reason, c.Message)
		}
	}

	h.s.Desired.Delete(key)
	h.waitFor("workspace status deleted", func() bool {
		_, ok := h.s.Workspaces.Get(key)
		return !ok
	})
}

// Invalid and Conflict come from Decls: absent while all is well, True
// while the file fails to load or another file declares the object too,
// False once fixed; each flip is one event.
func TestDeclarationConditions(t *testing.T) {
	h := newHarness(t, controllers.FakeKernel(t), harnessOptions{})
	h.declare(workspace("webapp", t.TempDir(), "coder"))
	h.declare(profile("coder", "", nil))
	key := controllers.WorkspaceKey("webapp")
	h.s.Decls.Set(key, controllers.Declared{File: "ws.yaml", Line: 1})
	h.start()
	h.waitFor("workspace Ready", func() bool {
		st, _ := h.s.Workspaces.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	if st, _ := h.s.Workspaces.Get(key); len(st.Conditions) != 1 {
		t.Errorf("conditions of a workspace that always loaded = %+v, want Ready only", st.Conditions)
	}

	bad := "ws.yaml:4: spec.processes.max_live: must be a positive integer"
	steps := []struct {
		name   string
		decl   controllers.Declared
		typ    string
		status v1alpha1.ConditionStatus
		reason string
		msg    string
		event  v1alpha1.EventType
	}{
		{name: "file_stops_loading", decl: controllers.Declared{File: "ws.yaml", Line: 1, Invalid: []string{bad, "ws.yaml:9: other"}},
			typ: v1alpha1.ConditionInvalid, status: v1alpha1.ConditionTrue, reason: controllers.ReasonLoadFailed,
			msg: bad + " (and 1 more)", event: v1alpha1.EventWarning},
		{name: "file_loads_again", decl: controllers.Declared{File: "ws.yaml", Line: 1},
			typ: v1alpha1.ConditionInvalid, status: v1alpha1.ConditionFalse, reason: controllers.ReasonLoaded,
			msg: "ws.yaml:1 loads", event: v1alpha1.EventNormal},
		{name: "declared_twice", decl: controllers.Declared{File: "ws.yaml", Line: 1, Conflicts: []string{"z.yaml:3"}},
			typ: v1alpha1.ConditionConflict, status: v1alpha1.ConditionTrue, reason: controllers.ReasonDuplicateDeclaration,
			msg: "also declared at z.yaml:3, ignored: ws.yaml:1 wins", event: v1alpha1.EventWarning},
		{name: "conflict_resolved", decl: controllers.Declared{File: "ws.yaml", Line: 1},
			typ: v1alpha1.ConditionConflict, status: v1alpha1.ConditionFalse, reason: controllers.ReasonConflictResolved,
			msg: "declared only at ws.yaml:1", event: v1alpha1.EventNormal},
	}
	before := occurrences(h.events(key))
	for i, st := range steps {
		h.s.Decls.Set(key, st.decl)
		var c v1alpha1.Condition
		h.waitFor(st.name, func() bool {
			ws, _ := h.s.Workspaces.Get(key)
			c = cond(ws.Conditions, st.typ)
			return c.Status == st.status && c.Reason == st.reason
		})
		if c.Message != st.msg {
			t.Errorf("%s: %s message %q, want %q", st.name, st.typ, c.Message, st.msg)
		}
		evs := h.events(key)
		if occurrences(evs) != before+int64(i)+1 {
			t.Fatalf("%s: events %v, want one more per step", st.name, reasons(evs))
		}
		if e := evs[len(evs)-1]; e.Type != st.event || e.Reason != st.reason || e.Message != st.msg {
			t.Errorf("%s: event %s %s %q, want %s %s %q", st.name, e.Type, e.Reason, e.Message, st.event, st.reason, st.msg)
		}
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// replace swaps what is at path for what make creates, in one step
// (renameat2 RENAME_EXCHANGE), so that nothing sees path missing between
// the two: the roots are watched, and a remove-then-create would be two
// flips.
func replace(t *testing.T, path string, make func(*testing.T, string)) {
	t.Helper()
	tmp := path + ".new"
	make(t, tmp)
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
