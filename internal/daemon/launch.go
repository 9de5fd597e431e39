package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/scope"
)

// newLauncher makes the launch path over the daemon's parts. It tells the
// controllers about launches they cannot see in the tree.
func (d *Daemon) newLauncher(mount string) error {
	store := launch.NewFileStore(filepath.Join(d.cfg.StateDir, "launches"), d.db)
	d.closers = append(d.closers, store.Close)
	var err error
	d.launcher, err = launch.New(launch.Options{
		Authority:   d.auth,
		Scopes:      d.backend,
		Store:       store,
		Workspaces:  workspaceIndex{d.stores},
		CgroupMount: mount,
		Metrics:     d.metrics,
		Clock:       d.clock,
		OnScope:     d.manager.EnqueueAgent,
		OnWorkspace: d.manager.EnqueueWorkspace,
		Network:     d.network,
		Logger:      d.log.With("component", "launch"),
	})
	return err
}

// workspaceIndex finds declared workspaces and their readiness in the
// stores.
type workspaceIndex struct{ s *controllers.Stores }

func (x workspaceIndex) Workspace(name string) (*v1alpha1.Workspace, bool, bool) {
	key := controllers.WorkspaceKey(name)
	obj, ok := x.s.Desired.Get(key)
	if !ok {
		return nil, false, false
	}
	w, ok := obj.(*v1alpha1.Workspace)
	if !ok {
		return nil, false, false
	}
	st, _ := x.s.Workspaces.Get(key)
	c := controllers.FindCondition(st.Conditions, v1alpha1.ConditionReady)
	ready := c != nil && c.Status == v1alpha1.ConditionTrue && c.ObservedGeneration == w.Metadata.Generation
	return w, ready, true
}

// launchesView is the launch path as the controllers see it: l is bound
// once the launcher exists, before anything runs.
type launchesView struct{ l *launch.Launcher }

var _ controllers.Launches = (*launchesView)(nil)

func (v *launchesView) Launched(id scope.Identity) (controllers.LaunchInfo, bool) {
	i, ok := v.l.Launched(id)
	return controllers.LaunchInfo{Workspace: i.Workspace, Attempt: i.Attempt, Consumer: i.Consumer, PID: i.PID}, ok
}

func (v *launchesView) Ended(id string) (controllers.LaunchEnd, bool) {
	e, ok := v.l.Ended(id)
	return controllers.LaunchEnd{How: e.String(), Failed: e.Failed(), OOMKilled: e.OOMKills > 0}, ok
}

func (v *launchesView) Settle(ctx context.Context, sc cgroup.Scope, emptiedAt time.Time) (bool, time.Duration, error) {
	return v.l.Settle(ctx, sc, emptiedAt)
}

func (v *launchesView) Forget(ctx context.Context, id string) error { return v.l.Forget(ctx, id) }

func (v *launchesView) Reserved(workspace string) int64 { return v.l.Reserved(workspace) }

// Run launches req for caller at once (the caller execs as soon as it
// is answered), and says on the workspace that the agent started or that
// its launch was refused.
func (v *view) Run(ctx context.Context, req launch.Request, caller *launch.Process) (launch.Plan, error) {
	pid := caller.PID
	plan, err := v.d.launcher.Launch(ctx, req, caller)
	v.d.recordRun(req.Workspace, pid, plan, err)
	return plan, err
}

// recordRun records the Normal AgentStarted or the Warning LaunchRefused
// of a run in workspace by process pid. The refusal says its code, fixed
// detail, attempt and attempt state: nothing from the authority's own
// words. A run that failed otherwise is in the log.
func (d *Daemon) recordRun(workspace string, pid int, plan launch.Plan, err error) {
	if workspace == "" {
		return
	}
	key := controllers.WorkspaceKey(workspace)
	var ref *launch.Refusal
	switch {
	case err == nil:
		d.recorder.Normal(key, controllers.ReasonAgentStarted, fmt.Sprintf(
			"agent started in scope %s (%s, pid %d)", plan.Scope, controllers.AttemptOf(plan.Attempt), pid))
	case errors.As(err, &ref):
		// No pid: repeats of one refusal without an attempt are counted
		// as one event.
		attempt := ref.Attempt
		if attempt == "" {
			attempt = "-"
		}
		d.recorder.Warning(key, controllers.ReasonLaunchRefused, fmt.Sprintf(
			"launch refused: %s: %s (attempt %s, state %s)", ref.Code, ref.Detail, attempt, ref.State))
	}
}

// Explain explains req once the launcher has recovered the launches of an
// earlier run: before, what it says of slots would be wrong.
func (v *view) Explain(ctx context.Context, req launch.Request) (launch.Explanation, error) {
	select {
	case <-v.d.launcher.Ready():
	default:
		return launch.Explanation{}, fmt.Errorf("explaining a run: %w", launch.ErrNotRunning)
	}
	return v.d.launcher.Explain(req)
}

// waitLauncher blocks until the launcher recovered the launches of an
// earlier run, so that the controllers never take a launch's scope for
// an unknown one; it reports false when ctx ended first.
func (d *Daemon) waitLauncher(ctx context.Context) bool {
	select {
	case <-d.launcher.Ready():
		return true
	case <-ctx.Done():
		return false
	}
}
