package controllers

import (
	"context"
	"fmt"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/reconcile"
)

// hostReconciler keeps the host's status, under Host/<declared name>, or
// Host/local when no Host is declared: capacity (each declared field,
// else the measured one), what was measured, what the backend can enforce
// per resource (its Probe) and its name. Ready is True once probed. It
// requeues after the interval. A key that is not the status key (a Host
// since renamed or deleted) has its status deleted.
//
// At most one Host reaches the desired store: the manifest source
// resolves a second one as a conflict.
type hostReconciler struct {
	*env
}

var _ reconcile.Reconciler = (*hostReconciler)(nil)

func (r *hostReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var host *v1alpha1.Host
	statusKey := HostKey(LocalHost)
	if objs := r.s.Desired.List(v1alpha1.KindHost); len(objs) > 0 {
		h, ok := objs[0].(*v1alpha1.Host)
		if !ok {
			return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("a declared Host is a %T", objs[0]))
		}
		host, statusKey = h, HostKey(h.Metadata.Name)
	}
	if req.Key != statusKey {
		r.s.Hosts.Delete(req.Key)
		return reconcile.Result{}, nil
	}
	var (
		gen      int64
		declared v1alpha1.Capacity
	)
	if host != nil {
		gen = host.Metadata.Generation
		if host.Spec.Capacity != nil {
			declared = *host.Spec.Capacity
		}
	}
	decl, _ := r.s.Decls.Get(req.Key)

	measured, merr := measureHost()
	caps, perr := r.backend.Probe(ctx)
	if perr != nil && ctx.Err() != nil {
		return reconcile.Result{}, ctx.Err()
	}
	var ready v1alpha1.Condition
	switch {
	case merr != nil:
		ready = condition(v1alpha1.ConditionReady, false, "", ReasonMeasureFailed, "measuring the host: "+merr.Error())
	case perr != nil:
		ready = condition(v1alpha1.ConditionReady, false, "", ReasonProbeFailed,
			fmt.Sprintf("probing backend %s: %v", r.backend.Name(), perr))
	default:
		ready = condition(v1alpha1.ConditionReady, true, ReasonProbed, "",
			fmt.Sprintf("backend %s gives %s", r.backend.Name(), describeCaps(caps)))
	}
	conds := []v1alpha1.Condition{ready}
	if c, ok := r.egressCondition(); ok {
		conds = append(conds, c)
	}
	now := r.now()
	updateStatus(r.s.Hosts, r.rec, req.Key, func(st *v1alpha1.HostStatus) []v1alpha1.Condition {
		st.Backend = r.backend.Name()
		st.Measured = measured
		st.Capacity = v1alpha1.Amounts{
			CPUMilli:    declaredOr(declared.CPUMilli, measured.CPUMilli),
			MemoryBytes: declaredOr(declared.MemoryBytes, measured.MemoryBytes),
			Tasks:       declaredOr(declared.Tasks, measured.Tasks),
		}
		if caps != nil {
			st.Enforcement = caps.API()
		}
		return setConditions(&st.Status, gen, now, append(declConditions(decl, st.Conditions), conds...)...)
	})
	switch {
	case merr != nil:
		return reconcile.Result{}, fmt.Errorf("host: %w", merr)
	case perr != nil:
		return reconcile.Result{}, fmt.Errorf("host: %w", perr)
	}
	return reconcile.Result{RequeueAfter: r.interval}, nil
}

func declaredOr(declared *int64, measured int64) int64 {
	if declared != nil {
		return *declared
	}
	return measured
}

// describeCaps says "cpu kernel (cgroup_v1), memory …".
func describeCaps(caps cgroup.Capabilities) string {
	var parts []string
	for _, e := range caps.API() {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", e.Resource, e.Level, e.Method))
	}
	if len(parts) == 0 {
		return "no enforcement"
	}
	return strings.Join(parts, ", ")
}
