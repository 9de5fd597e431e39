package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// PreparedExecution is an execution that passed authorization, holds a
// live-process slot and, when its workspace participates, a prepared
// attempt. It is one-shot: Launch or Cancel consumes it, and a second use
// is ErrConsumed. Dropped unsettled (the context Prepare was given ends
// first: the caller went away) it is cancelled in the background: its
// attempt cancelled, never assumed released, and its slot freed.
type PreparedExecution struct {
	l *Launcher
	w *v1alpha1.Workspace
	x Execution
	// digest is the meaning's digest, which Launch checks again.
	digest string
	// id is the scope's ID: the attempt's when admitted, else fresh.
	id string
	// attempt is the prepared attempt, "" when the execution runs
	// unaccounted; plan and deadline are its own.
	attempt     string
	plan        admission.Plan
	deadline    time.Time
	unaccounted Unaccounted
	slot        *Slot
	caller      *Process
	started     time.Time
	stopDrop    func() bool

	// mu guards used.
	mu   sync.Mutex
	used bool
}

// ID returns the launch's ID: its scope's 32 hex digits.
func (pe *PreparedExecution) ID() string { return pe.id }

// Attempt returns the prepared attempt's ID, "" when the execution runs
// unaccounted.
func (pe *PreparedExecution) Attempt() string { return pe.attempt }

// Deadline returns the prepared attempt's deadline, zero without one.
func (pe *PreparedExecution) Deadline() time.Time { return pe.deadline }

// Unaccounted says why an execution of an optional workspace runs without
// a reservation; "" when it has one or its workspace does not
// participate.
func (pe *PreparedExecution) Unaccounted() Unaccounted { return pe.unaccounted }

// Execution returns what the execution resolved to.
func (pe *PreparedExecution) Execution() Execution { return pe.x }

// take marks pe used, and reports whether it was not before.
func (pe *PreparedExecution) take() bool {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.used {
		return false
	}
	pe.used = true
	return true
}

// Plan is how the caller becomes the agent: exec Path with Argv and Env
// in Dir. It is inside its scope already.
type Plan struct {
	// ID is the launch's ID; Scope its scope's unit name.
	ID    string
	Scope string
	// Attempt is the attempt bound to the scope, "" when unaccounted.
	Attempt string
	Path    string
	Argv    []string
	Env     []string
	Dir     string
	// Unaccounted says why the execution runs without a reservation.
	Unaccounted Unaccounted
}

// Prepare authorizes req in its workspace, reserves a live-process slot
// and, when the workspace participates, admits an attempt, in that order:
// a request refused at one step asked nothing of the next. caller is the
// process that becomes the agent; Prepare takes it: a refusal closes it.
// It returns a *Refusal when the launch is refused; nothing was started
// then. ctx is the caller's: when it ends before the prepared execution
// is launched or cancelled, the execution is dropped.
func (l *Launcher) Prepare(ctx context.Context, req Request, caller *Process) (*PreparedExecution, error) {
	started := l.clock.Now()
	refuse := func(r *Refusal) (*PreparedExecution, error) {
		r.PID = caller.PID
		caller.Close()
		l.observeLaunch(strings.ToLower(string(r.Code)), started)
		return nil, r
	}
	select {
	case <-l.ready:
	case <-l.done:
		return refuse(&Refusal{Code: CodeInternal, Detail: detailNotRunning, State: StateNotAsked, cause: ErrNotRunning})
	case <-ctx.Done():
		return refuse(&Refusal{Code: CodeInternal, Detail: detailNotRunning, State: StateNotAsked, cause: ctx.Err()})
	}
	w, ready, ok := l.workspaces.Workspace(req.Workspace)
	switch {
	case !ok:
		return refuse(&Refusal{Code: CodeWorkspaceNotReady, Detail: detailNotDeclared, State: StateNotAsked, cause: ErrNotAuthorized})
	case !ready:
		return refuse(&Refusal{Code: CodeWorkspaceNotReady, Detail: detailNotReady, State: StateNotAsked, cause: ErrNotAuthorized})
	}
	x, ref := resolve(w, req)
	if ref != nil {
		return refuse(ref)
	}
	digest, ref := x.digest()
	if ref != nil {
		return refuse(ref)
	}
	maxLive := v1alpha1.DefaultMaxLive
	if w.Spec.Processes.MaxLive != nil {
		maxLive = *w.Spec.Processes.MaxLive
	}
	slot, err := l.slots.Reserve(x.Workspace, maxLive)
	if err != nil {
		return refuse(&Refusal{Code: CodeWorkspaceBusy, State: StateNotAsked, cause: err,
			Detail: fmt.Sprintf("%s (%d of %d)", detailBusy, l.slots.Held(x.Workspace), maxLive)})
	}
	pe := &PreparedExecution{l: l, w: w, x: x, digest: digest, id: scope.NewID(), slot: slot, caller: caller, started: started}
	if x.Participation == v1alpha1.ParticipationRequired || x.Participation == v1alpha1.ParticipationOptional {
		if ref := l.admit(ctx, pe); ref != nil {
			if x.Participation == v1alpha1.ParticipationRequired || !runsUnaccounted(ref) {
				slot.Free()
				return refuse(ref)
			}
			// Optional: run without a reservation, under an ID of its own,
			// not the attempt's.
			pe.id, pe.unaccounted = scope.NewID(), unaccountedFor(ref)
		}
	}
	pe.stopDrop = context.AfterFunc(ctx, pe.drop)
	return pe, nil
}

// runsUnaccounted reports whether an optional workspace runs unaccounted
// after refusal r: a denial or an authority that cannot answer, but not
// a fault of the launch path itself.
func runsUnaccounted(r *Refusal) bool {
	switch r.Code {
	case CodeResourceUnavailable, CodePolicyUnsupported, CodeAuthorityUnavailable, CodeAdmissionUnknown:
		return true
	}
	return false
}

func unaccountedFor(r *Refusal) Unaccounted {
	switch r.Code {
	case CodeResourceUnavailable:
		return UnaccountedResourceUnavailable
	case CodePolicyUnsupported:
		return UnaccountedPolicyUnsupported
	case CodeAdmissionUnknown:
		return UnaccountedAdmissionUnknown
	}
	return UnaccountedAuthorityUnavailable
}

// admit asks the authority for pe's attempt under pe.id. It returns nil
// when the attempt is prepared, and the refusal otherwise.
func (l *Launcher) admit(ctx context.Context, pe *PreparedExecution) *Refusal {
	id := pe.id
	actx, cancel := l.authCtx(ctx)
	rec, err := l.auth.Admit(actx, l.principal, id, pe.digest, pe.x.Intent)
	cancel()
	switch {
	case unknownOutcome(err):
		l.observeAdmission("unknown")
		return l.settleUnknown(ctx, id)
	case errors.Is(err, admission.ErrAttemptConflict):
		l.observeAdmission("attempt_conflict")
		return &Refusal{Code: CodeInternal, Detail: detailAttemptConflict, Attempt: id, State: StateNotRecorded, cause: err}
	case errors.Is(err, admission.ErrInvalidRequest):
		l.observeAdmission("invalid_request")
		return &Refusal{Code: CodeInternal, Detail: detailAuthority, Attempt: id, State: StateNotRecorded, cause: err}
	case err != nil:
		l.observeAdmission("unavailable")
		return &Refusal{Code: CodeAuthorityUnavailable, Detail: detailAuthority, Attempt: id, State: StateNotRecorded, cause: err}
	case rec.Phase == admission.PhasePrepared:
		l.observeAdmission("prepared")
		pe.attempt, pe.plan, pe.deadline = id, *rec.Plan, rec.Reservation.Deadline
		return nil
	case rec.Phase == admission.PhaseDenied:
		l.observeAdmission(string(rec.Denial))
		return l.denied(rec)
	}
	// A fresh key answered with another phase: not an answer to this
	// request.
	l.observeAdmission("unexpected")
	return &Refusal{Code: CodeInternal, Detail: detailAttemptConflict, Attempt: id, State: StateUnknown,
		cause: fmt.Errorf("attempt %s admitted as %s: %w", id, rec.Phase, admission.ErrAttemptConflict)}
}

// settleUnknown is what follows an unknown admission: exactly one lookup.
// Found prepared, the attempt is cancelled; found settled, it is
// reported as found; not found, or no answer, it stays unknown. It is
// never admitted again.
func (l *Launcher) settleUnknown(ctx context.Context, id string) *Refusal {
	unknown := &Refusal{Code: CodeAdmissionUnknown, Detail: detailUnknown, Attempt: id, State: StateUnknown, cause: ErrAdmissionUnknown}
	actx, cancel := l.authCtx(context.WithoutCancel(ctx))
	defer cancel()
	r, err := l.auth.Lookup(actx, l.principal, id)
	if err != nil {
		unknown.cause = fmt.Errorf("%w: lookup: %w", ErrAdmissionUnknown, err)
		return unknown
	}
	switch r.Phase {
	case admission.PhasePrepared:
		c, err := l.auth.Cancel(actx, l.principal, id)
		switch {
		case err != nil:
			unknown.cause = fmt.Errorf("%w: cancel: %w", ErrAdmissionUnknown, err)
		case c.Phase == admission.PhaseExpired:
			unknown.State = StateExpired
		default:
			unknown.State = StateCancelled
		}
		return unknown
	case admission.PhaseDenied:
		return l.denied(r)
	case admission.PhaseExpired:
		unknown.State = StateExpired
	case admission.PhaseCancelled:
		unknown.State = StateCancelled
	}
	return unknown
}

// denied is the refusal of a denied attempt, its detail read from the
// authority's snapshot: the first resource that does not fit, or the
// first minimum the plan does not give.
func (l *Launcher) denied(r admission.Record) *Refusal {
	s := l.auth.Snapshot()
	ref := &Refusal{Attempt: r.ID, State: StateDenied}
	switch r.Denial {
	case admission.DenialPolicyUnsupported:
		ref.Code, ref.Detail = CodePolicyUnsupported, unsupported(r.Intent.Minimum, s.Plan)
	default:
		ref.Code, ref.Detail = CodeResourceUnavailable, shortage(r.Intent.Requested, s, l.clock.Now())
	}
	ref.cause = fmt.Errorf("attempt %s denied %s", r.ID, r.Denial)
	return ref
}

// resource is one resource as budgets, requests and plans name it.
type resource struct {
	quantity string // cpu_milli
	level    string // cpu
	get      func(admission.Budget) int64
	min      func(admission.Levels) v1alpha1.Level
	plan     func(admission.Plan) cgroup.Enforcement
	limit    func(*cgroup.Limits) *int64
}

var resources = []resource{
	{"cpu_milli", "cpu", func(b admission.Budget) int64 { return b.CPUMilli },
		func(l admission.Levels) v1alpha1.Level { return l.CPU },
		func(p admission.Plan) cgroup.Enforcement { return p.CPU },
		func(l *cgroup.Limits) *int64 { return &l.CPUMilli }},
	{"memory_bytes", "memory", func(b admission.Budget) int64 { return b.MemoryBytes },
		func(l admission.Levels) v1alpha1.Level { return l.Memory },
		func(p admission.Plan) cgroup.Enforcement { return p.Memory },
		func(l *cgroup.Limits) *int64 { return &l.MemoryBytes }},
	{"tasks", "pids", func(b admission.Budget) int64 { return b.Tasks },
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
	msg := fmt.Sprintf("%s requested %d, free %d of %d", pick.quantity, pick.get(req), pick.get(s.Free), pick.get(s.Target))
	if s.Pressure.Level != pressure.Normal {
		msg += fmt.Sprintf(" (%s: target %d of %d%s)", s.Pressure.Cause(), pick.get(s.Target), pick.get(s.Capacity), since(s.Pressure.Since, now))
	}
	return msg
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
			*r.limit(&out) = r.get(req)
		}
	}
	return out
}

// drop cancels pe in the background when its caller's context ended
// before it was launched or cancelled.
func (pe *PreparedExecution) drop() {
	if !pe.take() {
		return
	}
	l := pe.l
	l.observeLaunch("dropped", pe.started)
	if !l.goBackground(func(ctx context.Context) { pe.release(ctx) }) {
		// Stopping: free what is ours; the attempt expires at its
		// deadline.
		pe.slot.Free()
		pe.caller.Close()
	}
}

// Cancel cancels the prepared execution: its attempt is cancelled and its
// slot freed; nothing was started. A second use is ErrConsumed. The error
// is the authority's, when it could not confirm the cancellation; the
// slot is freed all the same, since no process will be created.
func (pe *PreparedExecution) Cancel(ctx context.Context) error {
	if !pe.take() {
		return ErrConsumed
	}
	pe.stopDrop()
	pe.l.observeLaunch("cancelled", pe.started)
	_, err := pe.release(ctx)
	return err
}

// release cancels pe's attempt, frees its slot and closes its caller:
// nothing was begun. It returns the state the attempt was left in. An
// unknown answer gets exactly one lookup, and a prepared attempt found by
// it one more cancel.
func (pe *PreparedExecution) release(ctx context.Context) (State, error) {
	defer pe.caller.Close()
	defer pe.slot.Free()
	if pe.attempt == "" {
		return StateNotAsked, nil
	}
	return pe.l.cancelAttempt(ctx, pe.attempt)
}

// cancelAttempt cancels a prepared (or begun) attempt and says in which
// state it was left.
func (l *Launcher) cancelAttempt(ctx context.Context, id string) (State, error) {
	actx, cancel := l.authCtx(context.WithoutCancel(ctx))
	defer cancel()
	r, err := l.auth.Cancel(actx, l.principal, id)
	if unknownOutcome(err) {
		r, err = l.auth.Lookup(actx, l.principal, id)
		if err == nil && r.Phase == admission.PhasePrepared {
			r, err = l.auth.Cancel(actx, l.principal, id)
		}
	}
	if err != nil {
		l.log.Warn("cancelling an attempt", "attempt", id, "err", err)
		return StateUnknown, err
	}
	if r.Phase == admission.PhaseExpired {
		return StateExpired, nil
	}
	return StateCancelled, nil
}

// Launch launches the prepared execution: the authority begins the
// launch, the launch is recorded, the scope is created with the caller
// moved in and the plan's limits, the scope is bound on what reading it
// back showed, and the run is authorized. It returns the plan the caller
// execs, or a *Refusal: nothing was started then, and what was made is
// undone or left to the scope's end. req must be the request prepared: a
// request for another execution is refused (ErrDigestMismatch) and the
// attempt cancelled. A prepared attempt past its deadline is refused
// (ErrExpired). A second use is ErrConsumed.
//
// Once begun, a launch runs to its end even when ctx ends: it cannot be
// left half made.
func (pe *PreparedExecution) Launch(ctx context.Context, req Request) (Plan, error) {
	if !pe.take() {
		return Plan{}, ErrConsumed
	}
	pe.stopDrop()
	plan, ref := pe.launch(context.WithoutCancel(ctx), req)
	if ref != nil {
		ref.PID = pe.caller.PID
		pe.l.observeLaunch(strings.ToLower(string(ref.Code)), pe.started)
		return Plan{}, ref
	}
	pe.l.observeLaunch("started", pe.started)
	return plan, nil
}

func (pe *PreparedExecution) launch(ctx context.Context, req Request) (Plan, *Refusal) {
	l, x := pe.l, pe.x
	refuse := func(code Code, detail string, state State, cause error) *Refusal {
		return &Refusal{Code: code, Detail: detail, Attempt: pe.attempt, State: state, cause: cause}
	}
	// The same execution, or none: its digest covers argv, workspace,
	// terminal, timeout and environment changes.
	if req.Workspace != x.Workspace {
		st, _ := pe.release(ctx)
		return Plan{}, refuse(CodeInternal, detailDigestMismatch, st, ErrDigestMismatch)
	}
	if again, ref := resolve(pe.w, req); ref != nil {
		st, _ := pe.release(ctx)
		return Plan{}, refuse(CodeInternal, detailDigestMismatch, st, fmt.Errorf("%w: %w", ErrDigestMismatch, ref))
	} else if d, ref := again.digest(); ref != nil || d != pe.digest {
		st, _ := pe.release(ctx)
		return Plan{}, refuse(CodeInternal, detailDigestMismatch, st, ErrDigestMismatch)
	}

	if pe.attempt != "" && !l.clock.Now().Before(pe.deadline) {
		st, _ := pe.release(ctx)
		return Plan{}, refuse(CodeResourceUnavailable, detailExpired, st, ErrExpired)
	}

	now := l.clock.Now()
	rec := Record{
		ID: pe.id, Workspace: x.Workspace, Profile: x.Profile, Attempt: pe.attempt, Generation: l.generation,
		PID: pe.caller.PID, UID: pe.caller.UID, StartTime: pe.caller.StartTime, BootID: l.bootID, Started: now,
	}
	if x.Timeout > 0 {
		rec.Deadline = now.Add(x.Timeout)
	}
	// The record and the launch's beginning go to two journals, written
	// at once; both are durable before the scope is created. Each is
	// undone when the other fails; a crash between them leaves what
	// recover settles: a record without a scope, or a begun attempt
	// without a record, neither of which made a scope.
	put := make(chan error, 1)
	go func() { put <- l.store.Put(ctx, rec) }()
	var (
		permit admission.Permit
		ref    *Refusal
	)
	if pe.attempt != "" {
		permit, ref = pe.begin(ctx)
	}
	if err := <-put; err != nil || ref != nil {
		if err == nil {
			if err := l.store.Delete(ctx, rec.ID); err != nil {
				l.log.Warn("deleting a launch record", "id", rec.ID, "err", err)
			}
		}
		if ref != nil {
			return Plan{}, ref // begin freed the slot
		}
		state := StateNotAsked
		if pe.attempt != "" {
			state = l.abandon(ctx, pe.attempt, admission.AbandonSpawnFailed)
		}
		pe.slot.Free()
		pe.caller.Close()
		return Plan{}, refuse(CodeInternal, detailRecordFailed, state, err)
	}

	// Known before the scope exists, so that the agent controller finds
	// the launch of a scope it sees appear.
	st := &launchState{rec: rec, proc: pe.caller, slot: pe.slot, launching: true}
	l.mu.Lock()
	l.launches[rec.ID] = st
	l.mu.Unlock()
	undo := func(reason admission.AbandonReason) State {
		state := StateNotAsked
		if pe.attempt != "" {
			state = l.abandon(ctx, pe.attempt, reason)
		}
		if err := l.store.Delete(ctx, rec.ID); err != nil {
			l.log.Warn("deleting a launch record", "id", rec.ID, "err", err)
		}
		l.mu.Lock()
		delete(l.launches, rec.ID)
		l.mu.Unlock()
		pe.slot.Free()
		pe.caller.Close()
		return state
	}
	sc, applied, err := l.scopes.CreateScope(ctx, x.Profile, pe.id, pe.caller.PID, pe.limits())
	if err != nil {
		if errors.Is(err, cgroup.ErrNoProcess) {
			return Plan{}, refuse(CodeInternal, detailCallerGone, undo(admission.AbandonHelperExited), err)
		}
		return Plan{}, refuse(CodeInternal, detailScopeFailed, undo(admission.AbandonSpawnFailed), err)
	}
	pe.slot.Fill()
	l.mu.Lock()
	st.path = sc.Path
	l.mu.Unlock()
	l.watch(pe.caller, sc.Name)
	defer l.launched(rec.ID, sc.Name)

	if pe.attempt != "" && pe.plan.CPU.Level == v1alpha1.LevelCooperative {
		// Cooperative CPU is scheduling priority, applied to the caller
		// before it runs anything and read back, as a limit is.
		if ok, err := pe.caller.deprioritize(); err != nil || !ok {
			l.log.Warn("the cooperative CPU level was not applied", "id", pe.id, "err", err)
		} else {
			applied = withCooperativeCPU(applied)
		}
	}
	if pe.attempt != "" {
		root := admission.Process{UID: pe.caller.UID, PID: pe.caller.PID, StartTime: pe.caller.StartTime, BootID: l.bootID}
		ev := admission.ScopeEvidence{
			Name: sc.Name, ObservedAt: l.clock.Now(), Exists: true, Populated: true, Applied: applied, Root: &root,
		}
		actx, cancel := l.authCtx(ctx)
		_, err := l.auth.BindScope(actx, l.principal, pe.attempt, permit, ev)
		cancel()
		if err != nil {
			// The scope holds the caller, which exits on this refusal:
			// the attempt drains until the scope's end settles it.
			state, _ := l.cancelAttempt(ctx, pe.attempt)
			detail := detailBindFailed
			if pe.caller.Exited() {
				detail = detailCallerGone
			}
			return Plan{}, refuse(CodeInternal, detail, state, err)
		}
		actx, cancel = l.authCtx(ctx)
		run, err := l.auth.AuthorizeRun(actx, l.principal, pe.attempt, permit)
		cancel()
		if err == nil && !run.MayExec {
			err = fmt.Errorf("attempt %s: run already authorized", pe.attempt)
		}
		if err != nil {
			state, _ := l.cancelAttempt(ctx, pe.attempt)
			return Plan{}, refuse(CodeInternal, detailRunNotAuthorized, state, err)
		}
	}
	return Plan{
		ID: pe.id, Scope: sc.Name, Attempt: pe.attempt, Path: x.Path, Argv: x.Argv, Env: x.Env, Dir: x.Dir,
		Unaccounted: pe.unaccounted,
	}, nil
}

// begin begins the launch of pe's attempt and returns its permit, or the
// refusal. An unknown answer gets exactly one lookup: a launch found
// begun, whose permit was lost, is abandoned (grant_not_received); one
// found prepared is cancelled.
func (pe *PreparedExecution) begin(ctx context.Context) (admission.Permit, *Refusal) {
	l := pe.l
	refuse := func(code Code, detail string, state State, cause error) *Refusal {
		pe.slot.Free()
		pe.caller.Close()
		return &Refusal{Code: code, Detail: detail, Attempt: pe.attempt, State: state, cause: cause}
	}
	actx, cancel := l.authCtx(ctx)
	lc, err := l.auth.BeginLaunch(actx, l.principal, pe.attempt)
	cancel()
	switch {
	case unknownOutcome(err):
		actx, cancel := l.authCtx(ctx)
		defer cancel()
		r, lerr := l.auth.Lookup(actx, l.principal, pe.attempt)
		switch {
		case lerr != nil:
			return admission.Permit{}, refuse(CodeAdmissionUnknown, detailUnknown, StateUnknown, err)
		case r.Phase == admission.PhaseLaunchCommitted:
			return admission.Permit{}, refuse(CodeInternal, detailNoPermit, l.abandon(ctx, pe.attempt, admission.AbandonGrantNotReceived), err)
		case r.Phase == admission.PhasePrepared:
			st, _ := l.cancelAttempt(ctx, pe.attempt)
			return admission.Permit{}, refuse(CodeInternal, detailNoPermit, st, err)
		}
		return admission.Permit{}, refuse(CodeInternal, detailNoPermit, stateOf(r.Phase), err)
	case err != nil:
		st, _ := l.cancelAttempt(ctx, pe.attempt)
		return admission.Permit{}, refuse(CodeAuthorityUnavailable, detailAuthority, st, err)
	case lc.Permit.IsZero() && lc.Record.Phase == admission.PhaseExpired:
		return admission.Permit{}, refuse(CodeResourceUnavailable, detailExpired, StateExpired, ErrExpired)
	case lc.Permit.IsZero():
		return admission.Permit{}, refuse(CodeInternal, detailNoPermit, stateOf(lc.Record.Phase),
			fmt.Errorf("attempt %s is %s", pe.attempt, lc.Record.Phase))
	}
	return lc.Permit, nil
}

// abandon reports that a begun launch created nothing.
//
// An abandonment the journal could not record (a full state disk) is
// tried again in the background until it is recorded: the attempt holds
// its reservation meanwhile, and no one else would ever release it while
// marshald runs.
func (l *Launcher) abandon(ctx context.Context, id string, reason admission.AbandonReason) State {
	actx, cancel := l.authCtx(ctx)
	defer cancel()
	_, err := l.auth.AbandonLaunch(actx, l.principal, id, reason)
	if err == nil {
		return StateCancelled
	}
	l.log.Warn("abandoning a launch", "attempt", id, "reason", reason, "err", err)
	if errors.Is(err, admission.ErrJournalFailed) {
		l.goBackground(func(ctx context.Context) { l.abandonLater(ctx, id, reason) })
	}
	return StateUnknown
}

// Waits between tries of an abandonment the journal could not record.
const (
	minAbandonRetry = time.Second
	maxAbandonRetry = 30 * time.Second
)

// abandonLater tries to abandon attempt id until the journal records it,
// the attempt is no longer the launcher's to abandon, or ctx ends. It
// tries again when the journal next commits, which shows it has space
// again, and after a wait growing to maxAbandonRetry.
func (l *Launcher) abandonLater(ctx context.Context, id string, reason admission.AbandonReason) {
	wait := minAbandonRetry
	for {
		var committed <-chan struct{}
		if c, ok := l.auth.(interface{ Changed() <-chan struct{} }); ok {
			committed = c.Changed()
		}
		t := l.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-committed:
			t.Stop()
		case <-t.C():
		}
		actx, cancel := l.authCtx(ctx)
		_, err := l.auth.AbandonLaunch(actx, l.principal, id, reason)
		cancel()
		if !errors.Is(err, admission.ErrJournalFailed) {
			if err != nil {
				l.log.Warn("abandoning a launch", "attempt", id, "reason", reason, "err", err)
			}
			return
		}
		wait = min(2*wait, maxAbandonRetry)
	}
}

// stateOf is the refusal state of an attempt found in phase p.
func stateOf(p admission.Phase) State {
	switch p {
	case admission.PhaseDenied:
		return StateDenied
	case admission.PhaseExpired:
		return StateExpired
	case admission.PhaseCancelled, admission.PhaseReleased, admission.PhaseDraining:
		return StateCancelled
	}
	return StateUnknown
}
