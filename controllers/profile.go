package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/reconcile"
)

// profileReconciler keeps each declared profile's slice and limits, and
// applies the orphans policy of a deleted one.
//
// A declared profile: EnsureSlice with its limits (it writes only what
// differs, so each reconcile corrects drift), then the status: slice,
// limits requested against read back, agents, Ready (the slice exists)
// and Enforced (every requested limit is in force). It requeues after the
// interval, so that drift written behind its back is corrected.
//
// A profile no longer declared: with orphans: stop, every live scope of it
// is killed (one event per agent); with keep, or when the profile was
// never seen declared (a scope found at start-up), they are left running.
// Empty scopes are removed, then the slice once it is empty; while it is
// busy, scope changes enqueue the profile again. The status is deleted
// with the slice.
type profileReconciler struct {
	*env

	// mu guards killed.
	mu sync.Mutex
	// killed holds, per deleted profile, the scopes already killed, so
	// that each records one event.
	killed map[string]map[string]bool
}

var _ reconcile.Reconciler = (*profileReconciler)(nil)

func newProfileReconciler(e *env) *profileReconciler {
	return &profileReconciler{env: e, killed: map[string]map[string]bool{}}
}

func (r *profileReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj, ok := r.s.Desired.Get(req.Key)
	if !ok {
		return r.deleted(ctx, req.Key)
	}
	p, ok := obj.(*v1alpha1.Profile)
	if !ok {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("%s is a %T, not a Profile", req.Key, obj))
	}
	name, gen := p.Metadata.Name, p.Metadata.Generation
	r.profiles.remember(name, p.Spec)
	r.forgetKilled(name)
	decl, _ := r.s.Decls.Get(req.Key)
	want := limitsOf(p.Spec.Limits)
	applied, err := r.backend.EnsureSlice(ctx, name, want)
	if err != nil && ctx.Err() != nil {
		return reconcile.Result{}, ctx.Err()
	}
	now, agents := r.now(), r.liveAgents(name)
	if err != nil {
		updateStatus(r.s.Profiles, r.rec, req.Key, func(st *v1alpha1.ProfileStatus) []v1alpha1.Condition {
			st.Slice, st.Agents = scope.SliceName(name), agents
			return setConditions(&st.Status, gen, now, append(declConditions(decl, st.Conditions),
				condition(v1alpha1.ConditionReady, false, "", ReasonSliceFailed,
					fmt.Sprintf("ensuring slice %s: %v", scope.SliceName(name), err)))...)
		})
		return reconcile.Result{}, fmt.Errorf("profile %q: %w", name, err)
	}
	limits, missing := limitStatuses(want, applied)
	enforced := "every requested limit is in force"
	switch {
	case len(missing) > 0:
		enforced = "requested limits not in force: " + strings.Join(missing, ", ")
	case len(limits) == 0:
		enforced = "no limits requested"
	}
	ready := condition(v1alpha1.ConditionReady, true, ReasonSliceReady, "", fmt.Sprintf("slice %s exists", scope.SliceName(name)))
	if l, blocked := r.egressBlocks(p.Spec); blocked {
		ready = condition(v1alpha1.ConditionReady, false, "", l.Reason, "launches are refused: the egress proxy is "+l.Message)
	}
	updateStatus(r.s.Profiles, r.rec, req.Key, func(st *v1alpha1.ProfileStatus) []v1alpha1.Condition {
		st.Slice, st.Limits, st.Agents = scope.SliceName(name), limits, agents
		return setConditions(&st.Status, gen, now, append(declConditions(decl, st.Conditions), ready,
			condition(v1alpha1.ConditionEnforced, len(missing) == 0, ReasonLimitsEnforced, ReasonLimitNotEnforced, enforced))...)
	})
	return reconcile.Result{RequeueAfter: r.interval}, nil
}

// deleted applies the orphans policy of a profile that is not declared
// and removes what it can.
func (r *profileReconciler) deleted(ctx context.Context, key reconcile.Key) (reconcile.Result, error) {
	name := key.Name
	spec, seen := r.profiles.lookup(name)
	stop := seen && spec.Orphans == v1alpha1.OrphansStop
	var (
		errs []error
		live int64
	)
	for _, sc := range r.scopesOf(name) {
		if !sc.Populated {
			// No launch targets a profile that is not declared, so an
			// empty scope of it is done.
			if err := r.backend.RemoveScope(ctx, sc); err != nil && !errors.Is(err, cgroup.ErrBusy) {
				errs = append(errs, err)
			}
			continue
		}
		live++
		if !stop {
			continue
		}
		if err := r.backend.Kill(ctx, sc); err != nil {
			errs = append(errs, err)
			continue
		}
		if r.markKilled(name, sc.Name) {
			r.rec.Normal(AgentKey(sc.Name), ReasonStopped, fmt.Sprintf(
				"profile %s was deleted and its orphans policy is stop: killed the agent's processes", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			return reconcile.Result{}, ctx.Err()
		}
		return reconcile.Result{}, fmt.Errorf("deleted profile %q: %w", name, err)
	}
	err := r.backend.RemoveSlice(ctx, name)
	switch {
	case errors.Is(err, cgroup.ErrBusy) && len(r.scopesOf(name)) == 0:
		// No scope of it is known, yet the slice is busy: the tree moved
		// on since the store was told (a scope removed by the agent
		// controller a moment ago, its event not yet applied), and no
		// later event need come. Retry with the error's short backoff
		// rather than wait for the interval.
		return reconcile.Result{}, fmt.Errorf("deleted profile %q: no scope of it is known: %w", name, err)
	case errors.Is(err, cgroup.ErrBusy):
		// Scopes remain: their changes enqueue the profile again; the
		// interval catches a child group that is not a scope.
		r.s.Profiles.Update(key, func(st v1alpha1.ProfileStatus, ok bool) (v1alpha1.ProfileStatus, bool) {
			st.Agents = live
			return st, ok
		})
		return reconcile.Result{RequeueAfter: r.interval}, nil
	case err != nil:
		if ctx.Err() != nil {
			return reconcile.Result{}, ctx.Err()
		}
		return reconcile.Result{}, fmt.Errorf("deleted profile %q: %w", name, err)
	}
	r.profiles.forget(name)
	r.forgetKilled(name)
	r.s.Profiles.Delete(key)
	return reconcile.Result{}, nil
}

// scopesOf returns the live scopes of profile.
func (r *profileReconciler) scopesOf(profile string) []cgroup.Scope {
	keys := r.scopesByProfile.Referrers(ProfileKey(profile))
	out := make([]cgroup.Scope, 0, len(keys))
	for _, k := range keys {
		if sc, ok := r.s.Scopes.Get(k); ok {
			out = append(out, sc)
		}
	}
	return out
}

// liveAgents counts the populated scopes of profile.
func (r *profileReconciler) liveAgents(profile string) int64 {
	var n int64
	for _, sc := range r.scopesOf(profile) {
		if sc.Populated {
			n++
		}
	}
	return n
}

// markKilled records that scope of profile was killed and reports whether
// it was not before.
func (r *profileReconciler) markKilled(profile, scope string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed[profile][scope] {
		return false
	}
	if r.killed[profile] == nil {
		r.killed[profile] = map[string]bool{}
	}
	r.killed[profile][scope] = true
	return true
}

func (r *profileReconciler) forgetKilled(profile string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.killed, profile)
}

// limitsOf converts a spec's limits to the backend's.
func limitsOf(l *v1alpha1.Limits) cgroup.Limits {
	var out cgroup.Limits
	if l == nil {
		return out
	}
	if l.CPUMilli != nil {
		out.CPUMilli = *l.CPUMilli
	}
	if l.MemoryBytes != nil {
		out.MemoryBytes = *l.MemoryBytes
	}
	if l.Tasks != nil {
		out.Tasks = *l.Tasks
	}
	return out
}

// limitStatuses compares each requested limit with the one read back, and
// returns a row for every resource requested or limited, and a phrase for
// each whose limit is not the one requested.
func limitStatuses(want cgroup.Limits, applied cgroup.Applied) (rows []v1alpha1.LimitStatus, missing []string) {
	for _, r := range cgroup.AllResources {
		w, got := want.Get(r), applied.Limits.Get(r)
		if w == 0 && got == 0 {
			continue
		}
		e := cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}.Of(r)
		if en, ok := applied.Enforced[r]; ok && got != 0 {
			e = en.Of(r)
		}
		rows = append(rows, v1alpha1.LimitStatus{Resource: string(r), Requested: w, Applied: got, Enforcement: e})
		if !cgroup.SameLimit(r, w, got) {
			missing = append(missing, fmt.Sprintf("%s (requested %s, applied %s)", r, amount(w), amount(got)))
		}
	}
	return rows, missing
}

func amount(v int64) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

// profileMemory remembers the last declared spec of every profile the
// profile controller reconciled, until its slice is removed after its
// deletion: the desired store forgets a deleted profile, but its orphans
// policy still applies. It is safe for concurrent use.
type profileMemory struct {
	// mu guards specs.
	mu    sync.Mutex
	specs map[string]v1alpha1.ProfileSpec
}

func newProfileMemory() *profileMemory {
	return &profileMemory{specs: map[string]v1alpha1.ProfileSpec{}}
}

func (m *profileMemory) remember(name string, spec v1alpha1.ProfileSpec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.specs[name] = spec
}

// lookup returns the last spec of profile name, and false when it was
// never seen declared or was forgotten.
func (m *profileMemory) lookup(name string) (v1alpha1.ProfileSpec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.specs[name]
	return s, ok
}

func (m *profileMemory) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.specs, name)
}
