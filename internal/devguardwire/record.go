package devguardwire

import (
	"fmt"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// The record as DevGuard answers it (its contract's AttemptRecord), every
// field present: an absent optional one is null.

type processID struct {
	BootID     string `json:"boot_id"`
	PID        uint32 `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

type instanceID struct {
	InstanceID string    `json:"instance_id"`
	Process    processID `json:"process"`
}

type observationTime struct {
	BootID      string `json:"boot_id"`
	MonotonicMS uint64 `json:"monotonic_ms"`
}

type reservation struct {
	LeaseID           string          `json:"lease_id"`
	Quantities        Budget          `json:"quantities"`
	PreparedAt        observationTime `json:"prepared_at"`
	PrepareDeadlineMS uint64          `json:"prepare_deadline_ms"`
}

type planned struct {
	Level  string `json:"level"`
	Method string `json:"method"`
}

type plan struct {
	ScopeKind string  `json:"scope_kind"`
	CPU       planned `json:"cpu"`
	Memory    planned `json:"memory"`
	PIDs      planned `json:"pids"`
}

type scopeID struct {
	Kind    string    `json:"kind"`
	ScopeID string    `json:"scope_id"`
	Root    processID `json:"root"`
}

type applied struct {
	Scope      scopeID         `json:"scope"`
	Plan       plan            `json:"plan"`
	Quantities Budget          `json:"quantities"`
	CPU        string          `json:"cpu"`
	Memory     string          `json:"memory"`
	PIDs       string          `json:"pids"`
	ObservedAt observationTime `json:"observed_at"`
}

type attemptRecord struct {
	Key                Key          `json:"key"`
	RequestFingerprint string       `json:"request_fingerprint"`
	Owner              instanceID   `json:"owner"`
	PolicyRevision     string       `json:"policy_revision"`
	Phase              string       `json:"phase"`
	Reservation        *reservation `json:"reservation"`
	Plan               *plan        `json:"plan"`
	Scope              *scopeID     `json:"scope"`
	Applied            *applied     `json:"applied"`
	Denial             *string      `json:"denial"`
	TrackingLost       bool         `json:"tracking_lost"`
	ReleaseReason      *string      `json:"release_reason"`
}

// scopeKind is what a marshal scope is on DevGuard's wire: a cgroup that
// contains the launch's whole process tree.
const scopeKind = "contained_cgroup"

// applicationApplied is the state of every resource of a bound scope:
// binding confirmed the plan, accounting included.
const applicationApplied = "applied"

// instanceOf renders an instance.
func instanceOf(in admission.Instance) instanceID {
	return instanceID{InstanceID: in.ID, Process: processOf(in.Process)}
}

func processOf(p admission.Process) processID {
	return processID{BootID: p.BootID, PID: uint32(p.PID), StartTicks: p.StartTime}
}

func budgetOf(b admission.Budget) Budget {
	return Budget{CPUMilli: b.CPUMilli, MemoryBytes: b.MemoryBytes, Tasks: b.Tasks}
}

func plannedOf(e cgroup.Enforcement) planned {
	return planned{Level: string(e.Level), Method: string(e.Method)}
}

// recordOf renders a consumer's attempt as DevGuard answers it. It
// fails only for a record that is not a consumer's, which the Daemon
// never returns.
func recordOf(r admission.Record) (attemptRecord, error) {
	if r.Key == nil || r.Instance == nil {
		return attemptRecord{}, fmt.Errorf("attempt %s is not a consumer's", r.ID)
	}
	out := attemptRecord{
		Key:                Key(*r.Key),
		RequestFingerprint: r.Fingerprint,
		Owner:              instanceOf(*r.Instance),
		PolicyRevision:     r.PolicyRevision,
		Phase:              string(r.Phase),
		TrackingLost:       r.ScopeLost,
	}
	if r.Denial != "" {
		d := string(r.Denial)
		out.Denial = &d
	}
	if r.Release != "" {
		rr := string(r.Release)
		out.ReleaseReason = &rr
	}
	if res := r.Reservation; res != nil {
		out.Reservation = &reservation{
			LeaseID:           leaseID(r.ID),
			Quantities:        budgetOf(res.Quantities),
			PreparedAt:        observationTime{BootID: r.BootID, MonotonicMS: r.PreparedMS},
			PrepareDeadlineMS: r.PreparedMS + uint64(res.Deadline.Sub(res.PreparedAt).Milliseconds()),
		}
	}
	if p := r.Plan; p != nil {
		out.Plan = &plan{ScopeKind: scopeKind, CPU: plannedOf(p.CPU), Memory: plannedOf(p.Memory), PIDs: plannedOf(p.PIDs)}
	}
	// A scope is shown with its root, the helper bound into it: a scope
	// the agent controller found for a launch that never bound has none
	// to show, and stays null.
	if r.Scope != "" && r.Root != nil {
		sc := scopeID{Kind: scopeKind, ScopeID: r.Scope, Root: processOf(*r.Root)}
		out.Scope = &sc
		if r.Applied != nil && out.Plan != nil && out.Reservation != nil {
			out.Applied = &applied{
				Scope: sc, Plan: *out.Plan, Quantities: out.Reservation.Quantities,
				CPU: applicationApplied, Memory: applicationApplied, PIDs: applicationApplied,
				ObservedAt: observationTime{BootID: r.BootID, MonotonicMS: r.BoundMS},
			}
		}
	}
	return out, nil
}

// leaseID is the reservation's id: the attempt's 32 hex digits in the
// 8-4-4-4-12 form of DevGuard's lease ids.
func leaseID(id string) string {
	if len(id) != 32 {
		return id
	}
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
}
