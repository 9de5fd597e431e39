package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

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
	lc := pe.launching()
	if ref := pe.sameExecution(req); ref != nil {
		return Plan{}, lc.refused(ctx, ref)
	}
	if pe.attempt != "" && !pe.l.clock.Now().Before(pe.deadline) {
		return Plan{}, lc.refused(ctx, lc.refuse(CodeResourceUnavailable, detailExpired, ErrExpired))
	}
	return lc.run(ctx)
}

// Launch prepares and launches req for caller at once, for a caller that
// execs as soon as it is answered (marshalctl run). The steps and the
// refusals are those of Prepare and then PreparedExecution.Launch, in two
// durable commits where those make three: the attempt is admitted and
// committed to its launch in one transaction (AdmitLaunch), before
// anything is created, and the scope bound and the run authorized in one
// once the scope exists. It returns the plan the caller execs, or a
// *Refusal: nothing was started then. Once it asks for admission, the
// launch runs to its end even when ctx ends.
func (l *Launcher) Launch(ctx context.Context, req Request, caller *Process) (Plan, error) {
	started := l.clock.Now()
	pe, ref := l.prepare(ctx, req, caller, started, false)
	var plan Plan
	if ref == nil {
		pe.used = true // never handed out: nothing else can take it
		lc := pe.launching()
		lc.admitting = pe.participates()
		plan, ref = lc.run(context.WithoutCancel(ctx))
	}
	if ref != nil {
		ref.PID = caller.PID
		l.observeLaunch(strings.ToLower(string(ref.Code)), started)
		return Plan{}, ref
	}
	l.observeLaunch("started", started)
	return plan, nil
}

// run makes the scope, then binds and authorizes it.
func (lc *launching) run(ctx context.Context) (Plan, *Refusal) {
	sc, applied, ref := lc.makeScope(ctx)
	if ref != nil {
		return Plan{}, ref
	}
	defer lc.l.launched(lc.id, sc.Name)
	return lc.authorize(ctx, sc, applied)
}

// phaseLeft is the phase a launching records for an attempt it leaves as
// it is: unwinding settles nothing then.
const phaseLeft admission.Phase = "left"

// launching is a prepared execution being launched, or released: how far
// its attempt got, and the rollback that unmakes what the launch made.
// Its first steps undo what the prepared execution owns: the caller is
// closed, the slot freed and the attempt settled by how far it got.
type launching struct {
	*PreparedExecution
	rb rollback
	// phase is the attempt's phase as last known: "" once an unknown
	// answer left it unknown, phaseLeft when it is left as it is.
	phase admission.Phase
	// scoped is set once the scope exists.
	scoped bool
	// admitting is set when the launch asks for its attempt's admission
	// itself (AdmitLaunch) rather than beginning a prepared attempt.
	admitting bool
	// reason is why a begun launch that made no scope is abandoned.
	reason admission.AbandonReason
	permit admission.Permit
	// err is the authority's error when cancelling the attempt failed.
	err error
}

func (pe *PreparedExecution) launching() *launching {
	lc := &launching{PreparedExecution: pe, phase: admission.PhasePrepared, reason: admission.AbandonSpawnFailed}
	lc.rb.push(func(*Refusal) { pe.caller.Close() })
	lc.rb.push(func(*Refusal) { pe.slot.Free() })
	return lc
}

// pushSettle pushes the step that settles the attempt of a refused
// launch. A refusal that says its attempt's state already (an admission's
// refusal) keeps it.
func (lc *launching) pushSettle(ctx context.Context) {
	lc.rb.push(func(r *Refusal) {
		if st := lc.settleAttempt(ctx); r.State == "" {
			r.State = st
		}
	})
}

// refused unwinds lc for refusal ref, before anything was begun, and
// returns ref.
func (lc *launching) refused(ctx context.Context, ref *Refusal) *Refusal {
	lc.pushSettle(ctx)
	lc.rb.unwind(&ref)
	return ref
}

// release unwinds lc as for a refusal, without one to give: nothing was
// begun. It returns the state the attempt was left in.
func (lc *launching) release(ctx context.Context) (State, error) {
	return lc.refused(ctx, &Refusal{}).State, lc.err
}

// refuse is a refusal of the launch; the rollback sets its state.
func (lc *launching) refuse(code Code, detail string, cause error) *Refusal {
	return &Refusal{Code: code, Detail: detail, Attempt: lc.attempt, cause: cause}
}

// settleAttempt settles the attempt of a refused launch by how far it
// got, and returns the state it left it in: a prepared attempt is
// cancelled; a begun one whose launch made no scope is abandoned; one
// whose scope exists is cancelled, and drains until the scope's end
// settles it; one found settled is reported as found.
func (lc *launching) settleAttempt(ctx context.Context) State {
	l, id := lc.l, lc.attempt
	switch {
	case id == "":
		return StateNotAsked
	case lc.phase == "", lc.phase == phaseLeft:
		return StateUnknown
	case lc.phase == admission.PhasePrepared || lc.scoped:
		var st State
		st, lc.err = l.cancelAttempt(ctx, id)
		return st
	case lc.phase == admission.PhaseLaunchCommitted:
		return l.abandon(ctx, id, lc.reason)
	}
	return stateOf(lc.phase)
}

// makeScope makes the launch's scope: the launch committed to and
// recorded, and the scope created with the caller in it. Once it exists
// the launch is kept until the scope's end (the slot filled, the record
// and the caller's watch kept); on a refusal before, nothing is left of
// it.
func (lc *launching) makeScope(ctx context.Context) (_ cgroup.Scope, _ cgroup.Applied, ref *Refusal) {
	defer lc.rb.unwind(&ref)
	lc.pushSettle(ctx)
	l, pe := lc.l, lc.PreparedExecution
	rec, ref := lc.commitTo(ctx)
	if ref != nil {
		return cgroup.Scope{}, cgroup.Applied{}, ref
	}
	sc, applied, err := l.enter(ctx, &lc.rb, rec, pe.caller, pe.slot, pe.limits())
	if errors.Is(err, cgroup.ErrNoProcess) {
		lc.reason = admission.AbandonHelperExited
		return cgroup.Scope{}, cgroup.Applied{}, lc.refuse(CodeInternal, detailCallerGone, err)
	}
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, lc.refuse(CodeInternal, withCause(detailScopeFailed, err), err)
	}
	lc.scoped = true
	lc.rb.commit()
	return sc, applied, nil
}

// enter makes the scope of the launch recorded as rec with proc moved in
// and limits set, the step every launch takes: the launch is known first,
// so that the agent controller finds the launch of a scope it sees
// appear, and rb gets the step that forgets it should the scope not be
// made. Once the scope exists the launch is kept until the scope's end:
// its slot, when it has one, filled and proc watched. A launch of rec.ID
// known already is ErrClaimed, and nothing is done.
func (l *Launcher) enter(ctx context.Context, rb *rollback, rec Record, proc *Process, slot *Slot, limits cgroup.Limits) (cgroup.Scope, cgroup.Applied, error) {
	st := &launchState{rec: rec, proc: proc, slot: slot, launching: true}
	l.mu.Lock()
	if l.launches[rec.ID] != nil {
		l.mu.Unlock()
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("launch %s: %w", rec.ID, ErrClaimed)
	}
	l.launches[rec.ID] = st
	l.mu.Unlock()
	rb.push(func(*Refusal) {
		l.mu.Lock()
		delete(l.launches, rec.ID)
		l.mu.Unlock()
	})
	sc, applied, err := l.scopes.CreateScope(ctx, rec.Profile, rec.ID, proc.PID, limits)
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	slot.Fill()
	l.mu.Lock()
	st.path = sc.Path
	l.mu.Unlock()
	l.watch(proc, sc.Name)
	return sc, applied, nil
}

// sameExecution refuses req unless it is the execution prepared: its
// digest covers argv, workspace, terminal, timeout and environment.
func (pe *PreparedExecution) sameExecution(req Request) *Refusal {
	mismatch := func(cause error) *Refusal {
		return &Refusal{Code: CodeInternal, Detail: detailDigestMismatch, Attempt: pe.attempt, cause: cause}
	}
	if req.Workspace != pe.x.Workspace {
		return mismatch(ErrDigestMismatch)
	}
	again, ref := resolve(pe.w, req, pe.net)
	if ref != nil {
		return mismatch(fmt.Errorf("%w: %w", ErrDigestMismatch, ref))
	}
	if d, ref := again.digest(); ref != nil || d != pe.digest {
		return mismatch(ErrDigestMismatch)
	}
	return nil
}

// record is the launch's record, as it is written before the scope is
// created.
func (pe *PreparedExecution) record() Record {
	l, now := pe.l, pe.l.clock.Now()
	rec := Record{
		ID: pe.id, Workspace: pe.x.Workspace, Profile: pe.x.Profile, Attempt: pe.attempt, Generation: l.generation,
		PID: pe.caller.PID, UID: pe.caller.UID, StartTime: pe.caller.StartTime, BootID: l.bootID, Started: now,
	}
	if pe.x.Isolation == v1alpha1.IsolationNetns {
		rec.Isolation = pe.x.Isolation
	}
	if pe.x.Timeout > 0 {
		rec.Deadline = now.Add(pe.x.Timeout)
	}
	return rec
}

// commitTo commits to the launch before anything is created, and returns
// its record: the authority begins it (or admits it and begins it, when
// admitting) and its record is written, at once; both are durable before
// the scope is created. A crash between them leaves what recover settles:
// a record without a scope, or a begun attempt without a record, neither
// of which made a scope. An optional workspace's execution is admitted
// before its record is written, as a refusal leaves it to run
// unaccounted under another ID.
func (lc *launching) commitTo(ctx context.Context) (Record, *Refusal) {
	l, pe := lc.l, lc.PreparedExecution
	if lc.admitting && pe.x.Participation == v1alpha1.ParticipationOptional {
		lc.admitting = false
		if ref := lc.admitLaunch(ctx); ref != nil && !pe.unaccountedAfter(ref) {
			return Record{}, ref
		}
	}
	rec := pe.record()
	if lc.admitting {
		rec.Attempt = pe.id // the attempt it may make, for recover
	}
	var commit func(context.Context) *Refusal
	switch {
	case lc.admitting:
		commit = lc.admitLaunch
	case pe.attempt != "" && lc.phase == admission.PhasePrepared:
		commit = lc.begin
	}
	var (
		ref *Refusal
		err error
	)
	if commit == nil {
		err = l.store.Put(ctx, rec)
	} else {
		put := make(chan error, 1)
		go func() { put <- l.store.Put(ctx, rec) }()
		ref = commit(ctx)
		err = <-put
	}
	if err == nil {
		lc.rb.push(func(*Refusal) {
			if err := l.store.Delete(ctx, rec.ID); err != nil {
				l.log.Warn("deleting a launch record", "id", rec.ID, "err", err)
			}
		})
	}
	switch {
	case ref != nil:
		return Record{}, ref
	case err != nil:
		return Record{}, lc.refuse(CodeInternal, withCause(detailRecordFailed, err), err)
	}
	return rec, nil
}

// admitLaunch admits the attempt and commits it to its launch in one
// request, and keeps its plan and permit; or it returns the admission's
// refusal, the attempt settled as an unknown admission's is.
func (lc *launching) admitLaunch(ctx context.Context) *Refusal {
	l, pe := lc.l, lc.PreparedExecution
	actx, cancel := l.authCtx(ctx)
	started, err := l.auth.AdmitLaunch(actx, l.principal, pe.id, pe.digest, pe.x.Intent)
	cancel()
	if err == nil && started.Permit.IsZero() && started.Record.Phase == admission.PhaseLaunchCommitted {
		// Committed by an earlier request: not an answer to this one.
		started.Record.Phase = admission.PhaseSuspect
	}
	if ref := l.admitted(ctx, pe.id, started.Record, err, admission.PhaseLaunchCommitted); ref != nil {
		return ref
	}
	pe.attempt, pe.plan = pe.id, *started.Record.Plan
	lc.phase, lc.permit = admission.PhaseLaunchCommitted, started.Permit
	return nil
}

// begin begins the launch of the attempt and keeps its permit, or returns
// the refusal. An unknown answer gets exactly one lookup: a launch found
// begun, whose permit was lost, is abandoned (grant_not_received); one
// found prepared is cancelled.
func (lc *launching) begin(ctx context.Context) *Refusal {
	l := lc.l
	actx, cancel := l.authCtx(ctx)
	started, err := l.auth.BeginLaunch(actx, l.principal, lc.attempt)
	cancel()
	switch {
	case unknownOutcome(err):
		lc.phase, lc.reason = "", admission.AbandonGrantNotReceived
		actx, cancel := l.authCtx(ctx)
		r, lerr := l.auth.Lookup(actx, l.principal, lc.attempt)
		cancel()
		if lerr != nil {
			return lc.refuse(CodeAdmissionUnknown, detailUnknown, err)
		}
		lc.phase = r.Phase
		return lc.refuse(CodeInternal, detailNoPermit, err)
	case err != nil:
		return lc.refuse(CodeAuthorityUnavailable, detailAuthority, err)
	case started.Permit.IsZero():
		lc.phase = started.Record.Phase
		if lc.phase == admission.PhaseExpired {
			return lc.refuse(CodeResourceUnavailable, detailExpired, ErrExpired)
		}
		return lc.refuse(CodeInternal, detailNoPermit, fmt.Errorf("attempt %s is %s", lc.attempt, lc.phase))
	}
	lc.phase, lc.permit = admission.PhaseLaunchCommitted, started.Permit
	return nil
}

// authorize binds the attempt to its scope, on the limits read back, and
// authorizes the run, in one request, and returns the plan the caller
// execs. A refusal
// leaves the scope to its end: the caller exits on it, and the attempt,
// cancelled, drains until the scope's end settles it.
func (lc *launching) authorize(ctx context.Context, sc cgroup.Scope, applied cgroup.Applied) (_ Plan, ref *Refusal) {
	defer lc.rb.unwind(&ref)
	lc.pushSettle(ctx)
	l, pe := lc.l, lc.PreparedExecution
	if pe.attempt != "" {
		run, err := l.bind(ctx, l.principal, pe.attempt, lc.permit, pe.plan, pe.caller, sc, applied)
		switch {
		case err != nil && pe.caller.Exited():
			return Plan{}, lc.refuse(CodeInternal, detailCallerGone, err)
		case err != nil:
			return Plan{}, lc.refuse(CodeInternal, detailBindFailed, err)
		case !run.MayExec:
			return Plan{}, lc.refuse(CodeInternal, detailRunNotAuthorized, fmt.Errorf("attempt %s: run already authorized", pe.attempt))
		}
	}
	lc.rb.commit()
	path, argv := pe.x.Path, pe.x.Argv
	if n := pe.net.Netns; n != nil {
		netns := *n
		netns.Attempt = pe.attempt
		netns.ID = pe.id
		path, argv = netns.Command(path, argv)
	}
	return Plan{
		ID: pe.id, Scope: sc.Name, Attempt: pe.attempt, Path: path, Argv: argv, Env: pe.x.Env, Dir: pe.x.Dir,
		Unaccounted: pe.unaccounted,
	}, nil
}

// bind binds attempt, begun by p with permit, to its scope sc, with proc
// the process moved in, on the limits read back (applied), and
// authorizes the run, in one request: the step every launch with an
// attempt takes once its scope exists. A cooperative CPU level is
// scheduling priority, applied to proc before it runs anything and read
// back, as a limit is.
func (l *Launcher) bind(ctx context.Context, p admission.Principal, attempt string, permit admission.Permit, plan admission.Plan,
	proc *Process, sc cgroup.Scope, applied cgroup.Applied) (admission.Run, error) {
	if plan.CPU.Level == v1alpha1.LevelCooperative {
		if ok, err := proc.deprioritize(); err != nil || !ok {
			l.log.Warn("the cooperative CPU level was not applied", "attempt", attempt, "err", err)
		} else {
			applied = withCooperativeCPU(applied)
		}
	}
	root := admission.Process{UID: proc.UID, PID: proc.PID, StartTime: proc.StartTime, BootID: l.bootID}
	ev := admission.ScopeEvidence{
		Name: sc.Name, ObservedAt: l.clock.Now(), Exists: true, Populated: true, Applied: applied, Root: &root,
	}
	actx, cancel := l.authCtx(ctx)
	defer cancel()
	return l.auth.BindAndAuthorize(actx, p, attempt, permit, ev)
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
