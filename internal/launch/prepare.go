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
	// net is how the execution reaches the network, as it was when it
	// was prepared.
	net Network
	x   Execution
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
	pe, ref := l.prepare(ctx, req, caller, started, true)
	if ref != nil {
		ref.PID = caller.PID
		l.observeLaunch(strings.ToLower(string(ref.Code)), started)
		return nil, ref
	}
	pe.stopDrop = context.AfterFunc(ctx, pe.drop)
	return pe, nil
}

// prepare is Prepare up to the prepared execution, which owns the caller,
// the slot and the attempt once it is returned; a refusal unmakes them.
// Without admitNow, admission is left to the launch (Launcher.Launch).
func (l *Launcher) prepare(ctx context.Context, req Request, caller *Process, started time.Time, admitNow bool) (_ *PreparedExecution, ref *Refusal) {
	var rb rollback
	defer rb.unwind(&ref)
	rb.push(func(*Refusal) { caller.Close() })
	select {
	case <-l.ready:
	case <-l.done:
		return nil, &Refusal{Code: CodeInternal, Detail: detailNotRunning, State: StateNotAsked, cause: ErrNotRunning}
	case <-ctx.Done():
		return nil, &Refusal{Code: CodeInternal, Detail: detailNotRunning, State: StateNotAsked, cause: ctx.Err()}
	}
	w, ready, ok := l.workspaces.Workspace(req.Workspace)
	switch {
	case !ok:
		return nil, &Refusal{Code: CodeWorkspaceNotReady, Detail: detailNotDeclared, State: StateNotAsked, cause: ErrNotAuthorized}
	case !ready:
		return nil, &Refusal{Code: CodeWorkspaceNotReady, Detail: detailNotReady, State: StateNotAsked, cause: ErrNotAuthorized}
	}
	net, ref := l.networkOf(w, caller.UID)
	if ref != nil {
		return nil, ref
	}
	x, ref := resolve(w, req, net)
	if ref != nil {
		return nil, ref
	}
	digest, ref := x.digest()
	if ref != nil {
		return nil, ref
	}
	maxLive := v1alpha1.DefaultMaxLive
	if w.Spec.Processes.MaxLive != nil {
		maxLive = *w.Spec.Processes.MaxLive
	}
	slot, err := l.slots.Reserve(x.Workspace, maxLive)
	if err != nil {
		return nil, &Refusal{Code: CodeWorkspaceBusy, State: StateNotAsked, cause: err,
			Detail: fmt.Sprintf("%s (%d of %d)", detailBusy, l.slots.Held(x.Workspace), maxLive)}
	}
	rb.push(func(*Refusal) { slot.Free() })
	pe := &PreparedExecution{l: l, w: w, net: net, x: x, digest: digest, id: scope.NewID(), slot: slot, caller: caller, started: started}
	if admitNow && pe.participates() {
		if ref := l.admit(ctx, pe); ref != nil && !pe.unaccountedAfter(ref) {
			return nil, ref
		}
	}
	rb.commit()
	return pe, nil
}

// participates reports whether pe's workspace asks for admission.
func (pe *PreparedExecution) participates() bool {
	p := pe.x.Participation
	return p == v1alpha1.ParticipationRequired || p == v1alpha1.ParticipationOptional
}

// unaccountedAfter reports whether pe runs unaccounted after its
// admission was refused with r, as an optional workspace's execution does
// after a denial or an authority that cannot answer (but not after a
// fault of the launch path itself). It then runs under an ID of its own,
// not the attempt's.
func (pe *PreparedExecution) unaccountedAfter(r *Refusal) bool {
	if pe.x.Participation != v1alpha1.ParticipationOptional || !runsUnaccounted(r) {
		return false
	}
	pe.id, pe.unaccounted = scope.NewID(), unaccountedFor(r)
	return true
}

// runsUnaccounted reports whether refusal r of an admission leaves an
// optional workspace's execution to run unaccounted.
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
	actx, cancel := l.authCtx(ctx)
	rec, err := l.auth.Admit(actx, l.principal, pe.id, pe.digest, pe.x.Intent)
	cancel()
	if ref := l.admitted(ctx, pe.id, rec, err, admission.PhasePrepared); ref != nil {
		return ref
	}
	pe.attempt, pe.plan, pe.deadline = pe.id, *rec.Plan, rec.Reservation.Deadline
	return nil
}

// admitted maps the authority's answer to the admission of attempt id:
// nil when the attempt was recorded in phase want, the refusal otherwise.
// An unknown answer is settled by one lookup.
func (l *Launcher) admitted(ctx context.Context, id string, rec admission.Record, err error, want admission.Phase) *Refusal {
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
	case rec.Phase == want:
		l.observeAdmission("prepared")
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
// Found prepared, the attempt is cancelled; found committed to its launch
// (by AdmitLaunch, whose permit was lost), the launch is abandoned
// (grant_not_received); found settled, it is reported as found; not
// found, or no answer, it stays unknown. It is never admitted again.
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
	case admission.PhaseLaunchCommitted:
		unknown.State = l.abandon(context.WithoutCancel(ctx), id, admission.AbandonGrantNotReceived)
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
		lc := pe.launching()
		lc.phase = phaseLeft
		lc.release(context.Background())
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
// nothing was begun. It returns the state the attempt was left in.
func (pe *PreparedExecution) release(ctx context.Context) (State, error) {
	return pe.launching().release(ctx)
}

// cancelAttempt cancels a prepared (or begun) attempt and says in which
// state it was left. An unknown answer gets exactly one lookup, and a
// prepared attempt found by it one more cancel.
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
