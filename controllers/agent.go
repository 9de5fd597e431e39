package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/reconcile"
)

// Launches is the launch path's record of the scopes it made, which the
// agent and workspace controllers consult. internal/launch's Launcher
// implements it (through the daemon).
type Launches interface {
	// Launched returns what was recorded of the launch of the scope id
	// names, and false when marshald did not launch that scope: no launch
	// recorded its ID, or the launch of that ID is of another profile or
	// at another path (id.Path "" when not known). Only a scope it
	// launched is an agent of a workspace.
	Launched(id scope.Identity) (LaunchInfo, bool)
	// Settle reports whether the launch of sc is over: its scope seen
	// empty (read afresh) and its launched process known to have exited;
	// when it is, the launch's attempt has been reconciled with that
	// evidence. sc.Path is empty when the scope is gone; emptiedAt is
	// then when it was last seen empty (zero: never). A launch in
	// progress or still running is not over (false, 0, nil). A launch
	// whose scope is gone unseen is not over yet either: retry says when
	// to ask again, if the scope's report from the observer has not
	// come before.
	Settle(ctx context.Context, sc cgroup.Scope, emptiedAt time.Time) (over bool, retry time.Duration, err error)
	// Ended says how the launch of id ended, once Settle found it over,
	// and false before.
	Ended(id string) (LaunchEnd, bool)
	// Forget ends the launch of id once its scope is gone: its record is
	// deleted and its slot freed.
	Forget(ctx context.Context, id string) error
	// Reserved returns the slots of a workspace held for launches in
	// progress.
	Reserved(workspace string) int64
}

// LaunchInfo is what the launch path recorded of a launch.
type LaunchInfo struct {
	// Workspace is the workspace it was launched in.
	Workspace string
	// Attempt is the admission attempt bound to its scope, "" when it
	// runs unaccounted.
	Attempt string
	// Consumer is the consumer of DevGuard's wire whose launch helper it
	// is, in no workspace; "" for a launch of marshald's own.
	Consumer string
	// PID is the launched process.
	PID int
}

// LaunchEnd is how a launch ended, for its event.
type LaunchEnd struct {
	// How says it in fixed phrases and numbers: "exited with status 3".
	How string
	// Failed: not a status of 0, or an OOM kill in the scope.
	Failed bool
	// OOMKilled: the kernel OOM-killed a process of the scope.
	OOMKilled bool
}

// agentReconciler keeps one AgentStatus per live scope (key
// Agent/<scope name>) from the observed scope: profile, id, path,
// populated, since (when the controller first saw it), and, for a scope
// the launch path recorded, its workspace and attempt. It does not poll
// usage.
//
// A recorded launch's scope that is empty is removed once Launches says
// the launch is over (the scope read empty, its process exited, its
// attempt reconciled on that evidence), and the launch is then forgotten:
// its slot is freed. A scope of a recorded launch that vanished (a
// systemd scope removes itself once empty) is settled on when it was last
// seen empty. Any other empty scope is removed through the backend when
// it was seen populated before (its agent exited), when it was already
// empty at start-up (garbage collection), or when it stayed empty for
// the grace period; a fresh scope is left alone for the grace. The
// status is deleted once the scope is gone.
//
// A live (populated) scope whose profile is not declared is an orphan and
// is kept running (the safe default): its Orphaned condition is True. The
// exception is a profile deleted with orphans: stop, whose scopes the
// profile controller kills instead.
type agentReconciler struct {
	*env
	grace time.Duration

	// mu guards seen.
	mu sync.Mutex
	// seen holds what the controller remembers of each live scope.
	seen map[string]*agentMemo
}

// agentMemo is what the agent controller remembers of a scope.
type agentMemo struct {
	since        time.Time
	wasPopulated bool
	emptyAtStart bool
}

var _ reconcile.Reconciler = (*agentReconciler)(nil)

func newAgentReconciler(e *env, grace time.Duration) *agentReconciler {
	return &agentReconciler{env: e, grace: grace, seen: map[string]*agentMemo{}}
}

// collectAtStart marks the scopes that are empty at start-up for removal
// without grace.
func (r *agentReconciler) collectAtStart(scopes []reconcile.Entry[cgroup.Scope]) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range scopes {
		if !e.Value.Populated {
			r.seen[e.Value.Name] = &agentMemo{since: now, emptyAtStart: true}
		}
	}
}

func (r *agentReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	sc, ok := r.s.Scopes.Get(req.Key)
	info, launched := r.launchOf(req.Key.Name, sc.Path)
	if !ok {
		if launched {
			// Gone from the store; the launch path reads it afresh, since
			// the store may not have seen it yet.
			id, _ := scope.ParseScopeName(req.Key.Name)
			gone := cgroup.Scope{Name: req.Key.Name, Profile: id.Profile, ID: id.ID}
			if done, retry, err := r.endLaunch(ctx, gone, info); err != nil || !done {
				return reconcile.Result{RequeueAfter: retry}, err
			}
		}
		r.mu.Lock()
		delete(r.seen, req.Key.Name)
		r.mu.Unlock()
		r.forgetEmptied(req.Key.Name)
		r.s.Agents.Delete(req.Key)
		return reconcile.Result{}, nil
	}
	now := r.now()
	memo := r.memo(sc, now)

	var conds []v1alpha1.Condition
	_, declared := r.s.Desired.Get(ProfileKey(sc.Profile))
	spec, remembered := r.profiles.lookup(sc.Profile)
	switch {
	case declared || !sc.Populated:
		// Not an orphan, or nothing left running: an empty scope is
		// removed, not kept.
	case remembered && spec.Orphans == v1alpha1.OrphansStop:
		// The profile controller is stopping it.
	case remembered:
		conds = append(conds, condition(v1alpha1.ConditionOrphaned, true, ReasonOrphaned, "", fmt.Sprintf(
			"profile %s was deleted and its orphans policy is keep: the agent keeps running", sc.Profile)))
	default:
		conds = append(conds, condition(v1alpha1.ConditionOrphaned, true, ReasonOrphaned, "", fmt.Sprintf(
			"profile %s is not declared: the agent keeps running", sc.Profile)))
	}
	if cur, _ := r.s.Agents.Get(req.Key); cur.ID == "" && !launched && r.launches != nil && r.rec != nil {
		// Said once, when the scope is first seen: only a scope the launch
		// path recorded is an agent marshald launched.
		r.rec.Warning(req.Key, ReasonForeignScope, fmt.Sprintf(
			"scope %s was not launched by marshald: it is not counted as an agent of profile %s where identity matters", sc.Name, sc.Profile))
	}
	updateStatus(r.s.Agents, r.rec, req.Key, func(st *v1alpha1.AgentStatus) []v1alpha1.Condition {
		st.Profile, st.ID, st.Path, st.Populated, st.Since = sc.Profile, sc.ID, sc.Path, sc.Populated, memo.since
		st.Workspace, st.Attempt, st.Consumer, st.Launched = info.Workspace, info.Attempt, info.Consumer, launched
		c := conds
		if declared && FindCondition(st.Conditions, v1alpha1.ConditionOrphaned) != nil {
			c = append(c, condition(v1alpha1.ConditionOrphaned, false, "", ReasonProfileDeclared,
				fmt.Sprintf("profile %s is declared", sc.Profile)))
		}
		return setConditions(&st.Status, 0, now, c...)
	})

	if sc.Populated {
		return reconcile.Result{}, nil
	}
	if launched {
		_, retry, err := r.endLaunch(ctx, sc, info)
		return reconcile.Result{RequeueAfter: retry}, err
	}
	if wait := r.grace - now.Sub(memo.since); !memo.wasPopulated && !memo.emptyAtStart && wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	// Busy means it became populated again since it was observed: its
	// populated event enqueues it.
	if err := r.backend.RemoveScope(ctx, sc); err != nil && !errors.Is(err, cgroup.ErrBusy) {
		if ctx.Err() != nil {
			return reconcile.Result{}, ctx.Err()
		}
		return reconcile.Result{}, fmt.Errorf("agent %s: %w", sc.Name, err)
	}
	return reconcile.Result{}, nil
}

// endLaunch removes the scope of a recorded launch once the launch is
// over, its attempt reconciled first, and then forgets the launch and
// says on its workspace how the agent ended. It reports whether it did; a
// launch not over is left for its scope's populated event or its
// process's exit to bring back, or, when Settle says so, for retry.
func (r *agentReconciler) endLaunch(ctx context.Context, sc cgroup.Scope, info LaunchInfo) (bool, time.Duration, error) {
	over, retry, err := r.launches.Settle(ctx, sc, r.emptiedAt(sc.Name))
	if err != nil || !over {
		return false, retry, err
	}
	// Read before Forget, said after it: once, as the launch is gone then.
	end, ended := r.launches.Ended(sc.ID)
	if err := r.backend.RemoveScope(ctx, sc); err != nil {
		if errors.Is(err, cgroup.ErrBusy) || ctx.Err() != nil {
			return false, 0, ctx.Err()
		}
		return false, 0, fmt.Errorf("agent %s: %w", sc.Name, err)
	}
	if err := r.launches.Forget(ctx, sc.ID); err != nil {
		return false, 0, fmt.Errorf("agent %s: %w", sc.Name, err)
	}
	if ended {
		r.recordEnd(sc, info, end)
	}
	return true, 0, nil
}

// recordEnd says on the agent's workspace how its launch ended.
func (r *agentReconciler) recordEnd(sc cgroup.Scope, info LaunchInfo, end LaunchEnd) {
	if r.rec == nil || info.Workspace == "" {
		return
	}
	msg := fmt.Sprintf("agent in scope %s (%s, pid %d) %s", sc.Name, AttemptOf(info.Attempt), info.PID, end.How)
	key := WorkspaceKey(info.Workspace)
	switch {
	case end.OOMKilled:
		r.rec.Warning(key, ReasonAgentOOMKilled, msg)
	case end.Failed:
		r.rec.Warning(key, ReasonAgentExited, msg)
	default:
		r.rec.Normal(key, ReasonAgentExited, msg)
	}
}

// AttemptOf names an agent's attempt in an event: "attempt ID", or
// "unaccounted" for a launch without one.
func AttemptOf(attempt string) string {
	if attempt == "" {
		return "unaccounted"
	}
	return "attempt " + attempt
}

// launchOf returns what the launch path recorded of scope name at path
// ("" when not known), and whether marshald launched it.
func (r *agentReconciler) launchOf(name, path string) (LaunchInfo, bool) {
	if r.launches == nil {
		return LaunchInfo{}, false
	}
	id, ok := scope.ParseScopeName(name)
	if !ok {
		return LaunchInfo{}, false
	}
	id.Path = path
	return r.launches.Launched(id)
}

// memo returns what is remembered of sc, first seen now if new, and notes
// whether it is populated.
func (r *agentReconciler) memo(sc cgroup.Scope, now time.Time) agentMemo {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.seen[sc.Name]
	if m == nil {
		m = &agentMemo{since: now}
		r.seen[sc.Name] = m
	}
	m.wasPopulated = m.wasPopulated || sc.Populated
	return *m
}
