package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// PressureSource says which pressure level is in force; pressure.Monitor
// and pressure.Controller are ones.
type PressureSource interface {
	Status(now time.Time) pressure.Status
}

// hostInputs are what the host controller and the backend's probe set.
type hostInputs struct {
	capacity Budget
	source   CapacitySource
	ttl      time.Duration
	hostSet  bool
	plan     *Plan
	// consumers are those SetConsumers serves, by id; reserved their
	// static control reservations, which come off capacity; and
	// policyRevision what their attempts record.
	consumers      map[string]Consumer
	reserved       Budget
	policyRevision string
}

// work is the work capacity: the capacity less the consumers' static
// control reservations.
func (in hostInputs) work() Budget { return in.capacity.RemainingAfter(in.reserved) }

// Changed returns a channel that is closed when the journal next commits
// a change or the host's inputs (SetHost, SetPlan) move, for watchers of
// Snapshot and Charged.
func (a *Authority) Changed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// SetHost sets the work capacity from the Host's declared capacity (nil,
// or a field omitted: measured less SystemReservation) and its
// prepared_ttl (zero: v1alpha1.DefaultPreparedTTL). Existing reservations
// are never revoked when the capacity shrinks.
func (a *Authority) SetHost(capacity *v1alpha1.Capacity, preparedTTL time.Duration) error {
	if preparedTTL < 0 {
		return fmt.Errorf("prepared_ttl %s: %w", preparedTTL, ErrInvalidRequest)
	}
	if preparedTTL == 0 {
		preparedTTL = v1alpha1.DefaultPreparedTTL
	}
	b, src, err := WorkCapacity(capacity, a.measure)
	if err != nil {
		return err
	}
	a.inMu.Lock()
	a.inputs.capacity, a.inputs.source, a.inputs.ttl, a.inputs.hostSet = b, src, preparedTTL, true
	a.inMu.Unlock()
	a.inputsChanged()
	return nil
}

// inputsChanged wakes the watchers of Changed after the host's inputs
// moved: what Snapshot says (readiness, capacity, target) changed
// without a commit.
func (a *Authority) inputsChanged() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notifyLocked()
}

// SetPlan sets the per-resource plan from the cgroup backend's probe.
func (a *Authority) SetPlan(caps cgroup.Capabilities) error {
	p, err := PlanFrom(caps)
	if err != nil {
		return err
	}
	a.inMu.Lock()
	a.inputs.plan = &p
	a.inMu.Unlock()
	a.inputsChanged()
	return nil
}

func (a *Authority) hostInputs() hostInputs {
	a.inMu.Lock()
	defer a.inMu.Unlock()
	return a.inputs
}

// target scales capacity by the pressure level in force at now.
func target(capacity Budget, level pressure.Level) Budget {
	switch level {
	case pressure.Normal:
		return capacity
	case pressure.Constrained:
		return capacity.Half()
	}
	return Budget{}
}

// NotReady says why the authority cannot decide.
type NotReady string

// Reasons the authority cannot decide.
const (
	NotReadyHostUnset NotReady = "host_unset"
	NotReadyPlanUnset NotReady = "plan_unset"
	// NotReadyJournalFull: the last commit failed for want of space on the
	// journal's file system; the next request tries again.
	NotReadyJournalFull NotReady = "journal_full"
	// NotReadyJournalFailed: the last commit failed otherwise; the next
	// request tries again.
	NotReadyJournalFailed NotReady = "journal_failed"
	// NotReadyJournalUnknown: a commit reported failure but the journal
	// holds it, so what it did is unknown; everything is refused until
	// marshald restarts and Open checks the journal.
	NotReadyJournalUnknown NotReady = "journal_unknown"
)

// Snapshot is what `describe host` and metrics show.
type Snapshot struct {
	// Ready reports whether the authority can decide; NotReady says why
	// not.
	Ready    bool     `json:"ready"`
	NotReady NotReady `json:"not_ready,omitempty"`
	// JournalFailedAt is when the journal's commits began to fail, while
	// NotReady is one of the journal's reasons.
	JournalFailedAt time.Time `json:"journal_failed_at,omitzero"`
	// Capacity is the work capacity, after the consumers' static control
	// reservations (Reserved), and where each resource of it came from.
	Capacity       Budget         `json:"capacity"`
	Reserved       Budget         `json:"reserved"`
	CapacitySource CapacitySource `json:"capacity_source"`
	// Target is the capacity scaled by pressure; Committed what charged
	// attempts hold; Free what is left for new ones (never below zero).
	Target    Budget `json:"target"`
	Committed Budget `json:"committed"`
	Free      Budget `json:"free"`
	// Charged counts the charged attempts.
	Charged  int             `json:"charged"`
	Pressure pressure.Status `json:"pressure"`
	Plan     *Plan           `json:"plan,omitempty"`
	// PreparedTTL is how long a prepared attempt waits for its launch.
	PreparedTTL time.Duration `json:"prepared_ttl"`
	// BootID is the boot the authority runs in.
	BootID string `json:"boot_id"`
}

// Snapshot returns the authority's state as of the last commit.
func (a *Authority) Snapshot() Snapshot {
	in := a.hostInputs()
	now := a.clock.Now()
	ps := a.pressure.Status(now)
	a.mu.Lock()
	t, journal := a.led.totals, a.journal
	a.mu.Unlock()
	s := Snapshot{
		Capacity:       in.work(),
		Reserved:       in.reserved,
		CapacitySource: in.source,
		Committed:      t.Charged,
		Charged:        t.Count,
		Pressure:       ps,
		PreparedTTL:    in.ttl,
		BootID:         a.bootID,
	}
	if in.plan != nil {
		p := *in.plan
		s.Plan = &p
	}
	switch {
	case journal.err != nil:
		s.NotReady, s.JournalFailedAt = journal.reason(), journal.since
	case !in.hostSet:
		s.NotReady = NotReadyHostUnset
	case in.plan == nil:
		s.NotReady = NotReadyPlanUnset
	default:
		s.Ready = true
	}
	s.Target = target(in.work(), ps.Level)
	s.Free = s.Target.RemainingAfter(t.Charged)
	return s
}

// Charged returns every charged attempt as of the last commit, for the
// agent controller's reconcile pass, in the order of their IDs.
func (a *Authority) Charged(ctx context.Context) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	out := make([]Record, 0, len(a.led.charged))
	for _, r := range a.led.charged {
		out = append(out, *r.clone())
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y Record) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Plan is the level and method this host gives each resource, from the
// cgroup backend's probe.
type Plan cgroup.PerResource[cgroup.Enforcement]

// Get returns what the plan gives r.
func (p Plan) Get(r cgroup.Resource) cgroup.Enforcement {
	return cgroup.PerResource[cgroup.Enforcement](p).Get(r)
}

func (p *Plan) set(r cgroup.Resource, e cgroup.Enforcement) {
	(*cgroup.PerResource[cgroup.Enforcement])(p).Set(r, e)
}

// PlanFrom turns a backend's capabilities into a plan. A resource the
// backend does not list is accounted: the authority's ledger always holds
// it. A level that does not match its method (accounting ⇔ accounted,
// qos_and_priority ⇔ cooperative and cpu only, cgroup_v2 or cgroup_v1 ⇔
// kernel) is an error: such a claim cannot be trusted.
func PlanFrom(caps cgroup.Capabilities) (Plan, error) {
	var p Plan
	for _, r := range cgroup.AllResources {
		e, ok := caps[r]
		if !ok {
			e = cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}
		}
		if !consistent(r, e) {
			return Plan{}, fmt.Errorf("%s: level %q with method %q: %w", r, e.Level, e.Method, ErrInvalidRequest)
		}
		p.set(r, e)
	}
	return p, nil
}

func consistent(r cgroup.Resource, e cgroup.Enforcement) bool {
	switch e.Method {
	case cgroup.MethodAccounting:
		return e.Level == v1alpha1.LevelAccounted
	case cgroup.MethodQoS:
		return e.Level == v1alpha1.LevelCooperative && r == cgroup.CPU
	case cgroup.MethodCgroupV2, cgroup.MethodCgroupV1:
		return e.Level == v1alpha1.LevelKernel
	}
	return false
}

// For returns the plan of one attempt whose minimum levels are min: a
// resource whose minimum is accounted is held by accounting alone, and
// any other at the level the host gives it (at least min, when Satisfies).
// An agent is therefore capped by the kernel at its request only where it
// asked to be: the host's best is what it may ask for, not what it gets.
func (p Plan) For(min Levels) Plan {
	out := p
	accounted := cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}
	for _, r := range cgroup.AllResources {
		if min.Get(r) == v1alpha1.LevelAccounted {
			out.set(r, accounted)
		}
	}
	return out
}

// Satisfies reports whether the plan gives every resource at least min.
func (p Plan) Satisfies(min Levels) bool {
	for _, r := range cgroup.AllResources {
		if p.Get(r).Level.Rank() < min.Get(r).Rank() {
			return false
		}
	}
	return true
}

// confirms reports whether applied shows every planned limit in force:
// above accounting the method must be the planned one, and a kernel limit
// must equal the reserved quantity, memory as the kernel rounds it down
// to a whole page (cgroup.Applied.Satisfies).
func (p Plan) confirms(applied cgroup.Applied, q Budget) bool {
	for _, r := range cgroup.AllResources {
		want := p.Get(r)
		if want.Level == v1alpha1.LevelAccounted {
			continue
		}
		got, ok := applied.Enforced[r]
		if !ok || got.Method != want.Method || got.Level != want.Level {
			return false
		}
		if want.Level == v1alpha1.LevelKernel && !applied.Satisfies(limitOf(r, q.Get(r))) {
			return false
		}
	}
	return true
}

// limitOf is a limit of v on r alone. v is a reserved quantity, within a
// capacity, so it fits in an int64.
func limitOf(r cgroup.Resource, q uint64) cgroup.Limits {
	var l cgroup.Limits
	l.Set(r, clampInt64(q))
	return l
}
