package controllers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/reconcile"
)

// workspaceReconciler keeps each Workspace's status: Ready while its root
// is an existing directory and its profile is declared, the number of
// live processes launched in it, and the slots held for launches in
// progress. Roots are watched (package pathwatch), so a root created or
// removed is seen at once; a slow requeue, ten intervals, is the safety
// net for file systems whose changes inotify does not see, and a launch
// checks the root again itself.
type workspaceReconciler struct {
	*env
}

var _ reconcile.Reconciler = (*workspaceReconciler)(nil)

func (r *workspaceReconciler) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj, ok := r.s.Desired.Get(req.Key)
	if !ok {
		r.roots.Set(req.Key.String(), "")
		r.s.Workspaces.Delete(req.Key)
		return reconcile.Result{}, nil
	}
	w, ok := obj.(*v1alpha1.Workspace)
	if !ok {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("%s is a %T, not a Workspace", req.Key, obj))
	}
	// Watch before looking, so a change right after the look is not
	// missed.
	r.roots.Set(req.Key.String(), w.Spec.Root)
	decl, _ := r.s.Decls.Get(req.Key)
	var (
		reason   string
		problems []string
	)
	if rsn, msg := checkRoot(w.Spec.Root); rsn != "" {
		reason, problems = rsn, append(problems, msg)
	}
	if _, ok := r.s.Desired.Get(ProfileKey(w.Spec.Profile)); !ok {
		if reason == "" {
			reason = ReasonProfileMissing
		}
		problems = append(problems, fmt.Sprintf("profile %s is not declared", w.Spec.Profile))
	} else if msg, failed := r.sliceFailed(w.Spec.Profile); failed {
		if reason == "" {
			reason = ReasonProfileNotReady
		}
		problems = append(problems, fmt.Sprintf("profile %s is not Ready: %s", w.Spec.Profile, msg))
	}
	ready := condition(v1alpha1.ConditionReady, true, ReasonWorkspaceReady, "",
		fmt.Sprintf("root %s is a directory and profile %s is declared", w.Spec.Root, w.Spec.Profile))
	if reason != "" {
		ready = condition(v1alpha1.ConditionReady, false, "", reason, strings.Join(problems, "; "))
	}
	now, gen, live, reserved := r.now(), w.Metadata.Generation, r.liveIn(w.Metadata.Name), r.reservedIn(w.Metadata.Name)
	updateStatus(r.s.Workspaces, r.rec, req.Key, func(st *v1alpha1.WorkspaceStatus) []v1alpha1.Condition {
		st.Live, st.Reserved = live, reserved
		return setConditions(&st.Status, gen, now, append(declConditions(decl, st.Conditions), ready)...)
	})
	return reconcile.Result{RequeueAfter: 10 * r.interval}, nil
}

// checkRoot returns a reason and a message when root is not an existing
// directory, and "" when it is.
func checkRoot(root string) (reason, msg string) {
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ReasonRootMissing, fmt.Sprintf("root %s does not exist", root)
	case err != nil:
		return ReasonRootInaccessible, fmt.Sprintf("root %s: %v", root, err)
	case !fi.IsDir():
		return ReasonRootNotDirectory, fmt.Sprintf("root %s is not a directory", root)
	}
	return "", ""
}

// liveIn counts the populated scopes launched in workspace name.
func (r *workspaceReconciler) liveIn(name string) int64 {
	var n int64
	for _, k := range r.scopesByWorkspace.Referrers(WorkspaceKey(name)) {
		if sc, ok := r.s.Scopes.Get(k); ok && sc.Populated {
			n++
		}
	}
	return n
}

// workspaceOf returns the workspace a scope was launched in. It is the one
// place that knows: the launch path records each launch's workspace
// before its scope exists. A scope it did not record (made by hand, or
// without Options.Launches) belongs to no workspace.
func (e *env) workspaceOf(sc cgroup.Scope) (string, bool) {
	if e.launches == nil {
		return "", false
	}
	info, ok := e.launches.Launched(scope.Identity{Profile: sc.Profile, ID: sc.ID, Scope: sc.Name, Path: sc.Path})
	if !ok {
		return "", false
	}
	return info.Workspace, true
}

// reservedIn counts the slots of workspace name held for launches in
// progress.
func (e *env) reservedIn(name string) int64 {
	if e.launches == nil {
		return 0
	}
	return e.launches.Reserved(name)
}

// sliceFailed returns the message of profile's Ready condition while its
// slice cannot be made: no launch into its workspaces could make a scope.
// A profile not Ready for its egress proxy is left to the launch's own,
// more precise, refusal.
func (r *workspaceReconciler) sliceFailed(profile string) (string, bool) {
	st, ok := r.s.Profiles.Get(ProfileKey(profile))
	if !ok {
		return "", false
	}
	c := FindCondition(st.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != v1alpha1.ConditionFalse || c.Reason != ReasonSliceFailed {
		return "", false
	}
	return c.Message, true
}
