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

// quantityNames are the names budgets and requests give each resource's
// quantity; levels and plans name the resource itself.
var quantityNames = cgroup.PerResource[string]{CPU: "cpu_milli", Memory: "memory_bytes", PIDs: "tasks"}

// shortage names the first resource whose request does not fit what is
// free: "memory_bytes requested N, free F of T", T being the target, and
// when pressure scales the target, why and since when: "(cpu pressure:
// target 750 of 1500 since 12s)".
func shortage(req admission.Budget, s admission.Snapshot, now time.Time) string {
	pick := cgroup.AllResources[0]
	for _, r := range cgroup.AllResources {
		if req.Get(r) > s.Free.Get(r) {
			pick = r
			break
		}
	}
	n := func(b admission.Budget) string { return show(pick, b.Get(pick)) }
	msg := fmt.Sprintf("%s requested %s, free %s of %s", quantityNames.Get(pick), n(req), n(s.Free), n(s.Target))
	if s.Pressure.Level != pressure.Normal {
		msg += fmt.Sprintf(" (%s: target %s of %s%s)", s.Pressure.Cause(), n(s.Target), n(s.Capacity), since(s.Pressure.Since, now))
	}
	return msg
}

// show writes an amount of r as its quantity counts it and, for bytes,
// in the IEC units describe host prints too: "268435456 (256MiB)".
func show(r cgroup.Resource, v uint64) string {
	if r != cgroup.Memory || v > math.MaxInt64 {
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
	for _, r := range cgroup.AllResources {
		given := v1alpha1.LevelAccounted
		if plan != nil {
			given = plan.Get(r).Level
		}
		if min.Get(r).Rank() > given.Rank() {
			return fmt.Sprintf("%s minimum %s, host gives %s", r, min.Get(r), given)
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
	for _, r := range cgroup.AllResources {
		if plan.Get(r).Level == v1alpha1.LevelKernel {
			// A reserved quantity fits its capacity, which fits an int64.
			out.Set(r, int64(min(req.Get(r), admission.MaxQuantity)))
		}
	}
	return out
}
