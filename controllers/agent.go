package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/reconcile"
)

// agentReconciler keeps one AgentStatus per live scope (key
// Agent/<scope name>) from the observed scope: profile, id, path,
// populated, and since, when the controller first saw it. It does not
// poll usage.
//
// A scope that is empty is removed through the backend when it was seen
// populated before (its agent exited), when it was already empty at
// start-up (garbage collection), or when it stayed empty for the grace
// period (a launch that never moved its process in); a fresh scope is
// left alone for the grace, because a launch creates it empty and moves
// its process in right after. The status is deleted once the scope is
// gone.
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
	if !ok {
		r.mu.Lock()
		delete(r.seen, req.Key.Name)
		r.mu.Unlock()
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
	updateStatus(r.s.Agents, r.rec, req.Key, func(st *v1alpha1.AgentStatus) []v1alpha1.Condition {
		st.Profile, st.ID, st.Path, st.Populated, st.Since = sc.Profile, sc.ID, sc.Path, sc.Populated, memo.since
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
