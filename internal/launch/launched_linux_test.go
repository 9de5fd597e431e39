package launch

import (
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// Launched answers for the scope marshald made, and for no group that
// only borrows its ID: not one named for another profile, not one of the
// same name at another path, not one whose ID was never launched.
func TestLaunchedIsOnlyTheScopeMarshaldMade(t *testing.T) {
	h := newHarness(t)
	h.workspace("web", v1alpha1.ParticipationNone, 1)
	h.start()
	c, plan := h.launch(h.request("web"))
	var made cgroup.Scope
	list, err := h.backend.ListScopes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range list {
		if sc.ID == plan.ID {
			made = sc
		}
	}
	if made.Path == "" {
		t.Fatalf("no scope of launch %s in %v", plan.ID, list)
	}
	own := scope.Identity{Profile: made.Profile, ID: made.ID, Scope: made.Name, Path: made.Path}
	if info, ok := h.l.Launched(own); !ok || info.Workspace != "web" || info.PID != c.cmd.Process.Pid {
		t.Errorf("Launched(its own scope) = %+v, %v; want workspace web, pid %d", info, ok, c.cmd.Process.Pid)
	}
	unknownPath := own
	unknownPath.Path = ""
	if _, ok := h.l.Launched(unknownPath); !ok {
		t.Error("Launched(its scope, path not known) = false, want true")
	}
	otherProfile := own
	otherProfile.Profile, otherProfile.Scope = "permissive", scope.ScopeName("permissive", own.ID)
	elsewhere := own
	elsewhere.Path = "/elsewhere/" + own.Scope
	neverLaunched := own
	neverLaunched.ID = scope.NewID()
	for name, id := range map[string]scope.Identity{"another profile": otherProfile, "another path": elsewhere, "another id": neverLaunched} {
		if info, ok := h.l.Launched(id); ok {
			t.Errorf("Launched(a scope of %s) = %+v, true; want false: marshald did not launch it", name, info)
		}
	}
	c.exit(t)
	h.settle(plan)
}
