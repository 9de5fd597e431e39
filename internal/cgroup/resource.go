package cgroup

import "github.com/marshal-dev/marshal/api/v1alpha1"

// Resource is one of the resources marshal limits.
type Resource string

// Resources marshal limits.
const (
	CPU    Resource = "cpu"
	Memory Resource = "memory"
	PIDs   Resource = "pids"
)

// AllResources lists every Resource in a fixed order.
var AllResources = []Resource{CPU, Memory, PIDs}

// PerResource holds one T for each Resource. It is the one place that
// tells a Resource's field: limits, budgets, levels, plans and the tables
// of files and properties that hold each resource's limit all read and
// write through it rather than switch on the resource.
type PerResource[T any] struct {
	CPU    T `json:"cpu"`
	Memory T `json:"memory"`
	PIDs   T `json:"pids"`
}

// field returns p's field for r, nil for a resource marshal does not
// limit.
func (p *PerResource[T]) field(r Resource) *T {
	switch r {
	case CPU:
		return &p.CPU
	case Memory:
		return &p.Memory
	case PIDs:
		return &p.PIDs
	}
	return nil
}

// Get returns r's value, the zero T for a resource marshal does not limit.
func (p PerResource[T]) Get(r Resource) T {
	if f := p.field(r); f != nil {
		return *f
	}
	var zero T
	return zero
}

// Set sets r's value to v; it does nothing for a resource marshal does
// not limit.
func (p *PerResource[T]) Set(r Resource, v T) {
	if f := p.field(r); f != nil {
		*f = v
	}
}

// belowKernel is how each resource is held when the kernel cannot hold
// its limits: CPU by scheduling priority, the rest by bookkeeping alone.
var belowKernel = PerResource[Enforcement]{
	CPU:    Enforcement{Level: v1alpha1.LevelCooperative, Method: MethodQoS},
	Memory: Enforcement{Level: v1alpha1.LevelAccounted, Method: MethodAccounting},
	PIDs:   Enforcement{Level: v1alpha1.LevelAccounted, Method: MethodAccounting},
}

// BelowKernel is the enforcement of r when the kernel cannot hold its
// limits, for the reason given ("" when none is known).
func BelowKernel(r Resource, reason string) Enforcement {
	e := belowKernel.Get(r)
	e.Reason = reason
	return e
}

// KernelEnforcement is the enforcement of r by the kernel through method
// m (cgroup_v2 or cgroup_v1), naming the file that holds the limit.
func KernelEnforcement(r Resource, m Method) Enforcement {
	return Enforcement{Level: v1alpha1.LevelKernel, Method: m, Controller: LimitFile(r, m)}
}
