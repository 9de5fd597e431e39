package launch

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/quantity"
)

// resource is one resource as budgets, requests and plans name it.
type resource struct {
	quantity string // cpu_milli
	level    string // cpu
	get      func(admission.Budget) uint64
	min      func(admission.Levels) v1alpha1.Level
	plan     func(admission.Plan) cgroup.Enforcement
	limit    func(*cgroup.Limits) *int64
}

var resources = []resource{
	{"cpu_milli", "cpu", func(b admission.Budget) uint64 { return b.CPUMilli },
		func(l admission.Levels) v1alpha1.Level { return l.CPU },
		func(p admission.Plan) cgroup.Enforcement { return p.CPU },
		func(l *cgroup.Limits) *int64 { return &l.CPUMilli }},
	{"memory_bytes", "memory", func(b admission.Budget) uint64 { return b.MemoryBytes },
		func(l admission.Levels) v1alpha1.Level { return l.Memory },
		func(p admission.Plan) cgroup.Enforcement { return p.Memory },
		func(l *cgroup.Limits) *int64 { return &l.MemoryBytes }},
	{"tasks", "pids", func(b admission.Budget) uint64 { return b.Tasks },
		func(l admission.Levels) v1alpha1.Level { return l.PIDs },
		func(p admission.Plan) cgroup.Enforcement { return p.PIDs },
		func(l *cgroup.Limits) *int64 { return &l.Tasks }},
}

// shortage names the first resource whose request does not fit what is
// free: "memory_bytes requested N, free F of T", T being the target, and
// when pressure scales the target, why and since when: "(cpu pressure:
// target 750 of 1500 since 12s)".
func shortage(req admission.Budget, s admission.Snapshot, now time.Time) string {
	pick := resources[0]
	for _, r := range resources {
		if r.get(req) > r.get(s.Free) {
			pick = r
			break
		}
	}
	n := func(b admission.Budget) string { return pick.show(pick.get(b)) }
	msg := fmt.Sprintf("%s requested %s, free %s of %s", pick.quantity, n(req), n(s.Free), n(s.Target))
	if s.Pressure.Level != pressure.Normal {
		msg += fmt.Sprintf(" (%s: target %s of %s%s)", s.Pressure.Cause(), n(s.Target), n(s.Capacity), since(s.Pressure.Since, now))
	}
	return msg
}

// show writes an amount of r as its quantity counts it and, for bytes,
// in the IEC units describe host prints too: "268435456 (256MiB)".
func (r resource) show(v uint64) string {
	if r.quantity != "memory_bytes" || v > math.MaxInt64 {
		return strconv.FormatUint(v, 10)
	}
	return fmt.Sprintf("%d (%s)", v, quantity.Bytes(int64(v)))
}

// since says how long ago t was, in whole seconds: " since 12s", or
// nothing when t is unknown.
func since(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf(" since %s", max(now.Sub(t), 0).Truncate(time.Second))
}

// unsupported names the first resource whose minimum is above the plan:
// "memory minimum kernel, host gives accounted".
func unsupported(min admission.Levels, plan *admission.Plan) string {
	for _, r := range resources {
		given := v1alpha1.LevelAccounted
		if plan != nil {
			given = r.plan(*plan).Level
		}
		if r.min(min).Rank() > given.Rank() {
			return fmt.Sprintf("%s minimum %s, host gives %s", r.level, r.min(min), given)
		}
	}
	return "minimum above the host's plan"
}

// limits are the scope limits pe's attempt's plan calls for; an
// execution without an attempt gets none.
func (pe *PreparedExecution) limits() cgroup.Limits {
	if pe.attempt == "" {
		return cgroup.Limits{}
	}
	return planLimits(pe.plan, pe.x.Intent.Requested)
}

// withCooperativeCPU returns applied with the CPU held at the cooperative
// level by scheduling priority.
func withCooperativeCPU(applied cgroup.Applied) cgroup.Applied {
	enforced := make(map[cgroup.Resource]cgroup.Enforcement, len(applied.Enforced)+1)
	for r, e := range applied.Enforced {
		enforced[r] = e
	}
	enforced[cgroup.CPU] = cgroup.Enforcement{Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS, Controller: "nice"}
	applied.Enforced = enforced
	return applied
}

// planLimits are the limits plan calls for on the scope of an attempt
// that reserved req: the reserved quantity of every resource the plan
// holds at kernel level, which BindScope confirms by reading them back.
func planLimits(plan admission.Plan, req admission.Budget) cgroup.Limits {
	var out cgroup.Limits
	for _, r := range resources {
		if r.plan(plan).Level == v1alpha1.LevelKernel {
			// A reserved quantity fits its capacity, which fits an int64.
			*r.limit(&out) = int64(min(r.get(req), admission.MaxQuantity))
		}
	}
	return out
}
