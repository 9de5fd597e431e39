package admission

import (
	"fmt"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Machine is what the host has in all: online CPUs, MemTotal, and the
// tasks the kernel can hold (the lower of pid_max and threads-max).
type Machine struct {
	CPUMilli    int64
	MemoryBytes int64
	Tasks       int64
}

// Floors of the system reservation.
const (
	reserveCPUMilliFloor = 500
	reserveMemoryFloor   = int64(512) << 20
	reserveTasksFloor    = 1024
)

// SystemReservation is what a measured capacity keeps back for the
// system: a quarter of each resource, and at least half a CPU, 512 MiB
// and 1024 tasks.
//
// DevGuard keeps back max(25% of CPUs, 2 CPUs) and max(25% of memory,
// 4 GiB) as headroom plus 0.5 CPU and 256 MiB for itself, sized for an
// 8-CPU, 16-GiB workstation: on a 2-CPU machine that leaves nothing to
// reserve. The quarter is kept, as the share an editor, a shell and the
// kernel's caches need; the floors are only what the daemon, its clients
// and sshd need. A 2-CPU, 4-GiB machine keeps 1.5 CPUs and 3 GiB, six
// executions at the default request; an 8-CPU, 16-GiB one keeps 6 CPUs
// and 12 GiB. A Host that declares its capacity gets exactly that.
func SystemReservation(m Machine) Budget {
	return budgetOf(
		max(reserveCPUMilliFloor, m.CPUMilli/4),
		max(reserveMemoryFloor, m.MemoryBytes/4),
		max(reserveTasksFloor, m.Tasks/4),
	)
}

// CapacitySource says, per resource, whether the capacity was declared
// by the Host or measured.
type CapacitySource struct {
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	PIDs   string `json:"pids"`
}

// Capacity sources.
const (
	SourceDeclared = "declared"
	SourceMeasured = "measured"
)

// WorkCapacity returns the capacity the authority may reserve: each field
// the Host declares as it is, each omitted one measured by measure less
// SystemReservation. measure is called only when a field is omitted.
func WorkCapacity(declared *v1alpha1.Capacity, measure func() (Machine, error)) (Budget, CapacitySource, error) {
	var d v1alpha1.Capacity
	if declared != nil {
		d = *declared
	}
	var b Budget
	src := CapacitySource{SourceDeclared, SourceDeclared, SourceDeclared}
	if d.CPUMilli == nil || d.MemoryBytes == nil || d.Tasks == nil {
		m, err := measure()
		if err != nil {
			return Budget{}, CapacitySource{}, fmt.Errorf("measuring host capacity: %w", err)
		}
		b = budgetOf(m.CPUMilli, m.MemoryBytes, m.Tasks).RemainingAfter(SystemReservation(m))
	}
	set := func(dst *uint64, v *int64, s *string) error {
		if v == nil {
			*s = SourceMeasured
			return nil
		}
		if *v <= 0 || uint64(*v) > MaxQuantity {
			return fmt.Errorf("declared capacity %d: %w", *v, ErrInvalidRequest)
		}
		*dst = uint64(*v)
		return nil
	}
	for _, f := range []struct {
		dst *uint64
		v   *int64
		s   *string
	}{{&b.CPUMilli, d.CPUMilli, &src.CPU}, {&b.MemoryBytes, d.MemoryBytes, &src.Memory}, {&b.Tasks, d.Tasks, &src.PIDs}} {
		if err := set(f.dst, f.v, f.s); err != nil {
			return Budget{}, CapacitySource{}, err
		}
	}
	b.CPUMilli, b.MemoryBytes, b.Tasks = min(b.CPUMilli, MaxQuantity), min(b.MemoryBytes, MaxQuantity), min(b.Tasks, MaxQuantity)
	return b, src, nil
}
