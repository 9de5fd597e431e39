package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Admit records attempt key for p: prepared, with a reservation whose
// deadline is prepared_ttl after the moment before the request was taken,
// or denied: resource_policy_unsupported when a minimum level is above
// the plan, resource_unavailable when the request does not fit what the
// target leaves in cpu, memory or tasks. A denial is recorded and final.
//
// A key admitted before returns its stored record, whatever capacity is
// free now, if digest and intent are the same and p admitted it;
// otherwise it is ErrAttemptConflict. Without host capacity or a plan it
// is ErrUnavailable, and nothing is recorded.
func (a *Authority) Admit(ctx context.Context, p Principal, key, digest string, intent Intent) (Record, error) {
	now := a.clock.Now()
	fp, err := admissionKey(key, digest, intent)
	if err != nil {
		return Record{}, err
	}
	return call(ctx, a, now, func(b *batch) (Record, error) { return b.admit(p, key, digest, fp, intent, now) })
}

// admissionKey checks an admission's key and returns the fingerprint of
// its digest and intent.
func admissionKey(key, digest string, intent Intent) (string, error) {
	if err := validKey(key); err != nil {
		return "", err
	}
	return Fingerprint(digest, intent)
}

// admit is Admit inside the batch.
func (b *batch) admit(p Principal, key, digest, fp string, intent Intent, now time.Time) (Record, error) {
	a := b.a
	if err := b.authorize(p); err != nil {
		return Record{}, err
	}
	r, err := b.load(key, now)
	if err != nil {
		return Record{}, err
	}
	if r != nil {
		if r.Fingerprint != fp || r.Owner != p.owner || r.Generation != p.generation {
			return Record{}, fmt.Errorf("attempt %s: %w", key, ErrAttemptConflict)
		}
		return *r, nil
	}
	in := a.hostInputs()
	if !in.hostSet || in.plan == nil {
		return Record{}, fmt.Errorf("no host capacity or plan yet: %w", ErrUnavailable)
	}
	n := &Record{
		ID: key, Owner: p.owner, Generation: p.generation, OwnerProcess: p.process,
		Digest: digest, Fingerprint: fp, Intent: intent, BootID: a.bootID,
	}
	b.decide(n, in, *in.plan, true, now)
	if err := b.put(nil, n); err != nil {
		return Record{}, err
	}
	return *n, nil
}

// decide makes n, a new attempt, prepared against what the host's
// inputs in leave free at now, or denied: resource_policy_unsupported
// when the request is not allowed or plan does not satisfy its minimum,
// resource_unavailable when it does not fit the target.
func (b *batch) decide(n *Record, in hostInputs, plan Plan, allowed bool, now time.Time) {
	intent := n.Intent
	switch {
	case !allowed, !plan.Satisfies(intent.Minimum):
		n.Phase, n.Denial = PhaseDenied, DenialPolicyUnsupported
	case !intent.Requested.Fits(target(in.work(), b.a.pressure.Status(now).Level).RemainingAfter(b.totals.Charged)):
		n.Phase, n.Denial = PhaseDenied, DenialResourceUnavailable
	default:
		pl := plan.For(intent.Minimum)
		n.Phase, n.Plan = PhasePrepared, &pl
		n.Reservation = &Reservation{Quantities: intent.Requested, PreparedAt: now, Deadline: now.Add(in.ttl)}
	}
}

// BeginLaunch commits a prepared attempt to its launch before its
// deadline (prepared → launch_committed) and returns a one-time permit;
// only its hash is stored. For any other phase it returns the attempt and
// no permit: a replay never grants a second launch.
func (a *Authority) BeginLaunch(ctx context.Context, p Principal, key string) (Launch, error) {
	now := a.clock.Now()
	if err := validKey(key); err != nil {
		return Launch{}, err
	}
	return call(ctx, a, now, func(b *batch) (Launch, error) { return b.beginLaunch(p, key, now) })
}

// AdmitLaunch is Admit and, when the attempt is prepared, BeginLaunch,
// in one transaction: the attempt is recorded committed to its launch,
// with the permit, or denied, and nothing is recorded when either step
// fails. It is for an owner that launches as soon as it is admitted, at
// the cost of one durable commit instead of two. A replay answers as the
// two requests would: the stored record, and a permit only if the attempt
// was still prepared.
func (a *Authority) AdmitLaunch(ctx context.Context, p Principal, key, digest string, intent Intent) (Launch, error) {
	now := a.clock.Now()
	fp, err := admissionKey(key, digest, intent)
	if err != nil {
		return Launch{}, err
	}
	return call(ctx, a, now, func(b *batch) (Launch, error) {
		r, err := b.admit(p, key, digest, fp, intent, now)
		if err != nil || r.Phase != PhasePrepared {
			return Launch{Record: r}, err
		}
		return b.beginLaunch(p, key, now)
	})
}

// beginLaunch is BeginLaunch inside the batch.
func (b *batch) beginLaunch(p Principal, key string, now time.Time) (Launch, error) {
	r, err := b.owned(p, key, now)
	if err != nil {
		return Launch{}, err
	}
	if r.Phase != PhasePrepared {
		return Launch{Record: *r}, nil
	}
	permit := newPermit()
	n := r.clone()
	n.Phase, n.permitHash = PhaseLaunchCommitted, permit.hash()
	if err := b.put(r, n); err != nil {
		return Launch{}, err
	}
	return Launch{Record: *n, Permit: permit}, nil
}

// BindScope binds a committed launch to its scope (launch_committed →
// scope_bound), on fresh read-back evidence that the scope named for the
// attempt exists and holds every planned limit; ev.ObservedAt must be at
// most MaxEvidenceAge before the call. The process recorded as the one
// moved into the scope is ev.Root when set, which must be running as
// itself (its start time, in this boot), and otherwise the caller's own.
// Binding the same scope again returns the record; a wrong permit is
// ErrUnauthorized, evidence that does not confirm the plan or names a
// root that is not running ErrEvidence, and any phase but
// launch_committed ErrInvalidTransition.
func (a *Authority) BindScope(ctx context.Context, p Principal, key string, permit Permit, ev ScopeEvidence) (Record, error) {
	root, err := a.bindable(p, key, ev)
	if err != nil {
		return Record{}, err
	}
	// Freshness is judged after the evidence was gathered.
	now, bound := a.clock.Now(), a.uptime()
	return call(ctx, a, now, func(b *batch) (Record, error) { return b.bindScope(p, key, permit, ev, root, now, bound) })
}

// BindAndAuthorize is BindScope and AuthorizeRun in one transaction: the
// scope is bound and the run authorized, or, when either step fails,
// nothing changes. It is for an owner that execs as soon as the scope is
// bound, at the cost of one durable commit instead of two. MayExec is
// true on the first authorization only, as AuthorizeRun's: a replay for
// the same scope answers MayExec false.
func (a *Authority) BindAndAuthorize(ctx context.Context, p Principal, key string, permit Permit, ev ScopeEvidence) (Run, error) {
	root, err := a.bindable(p, key, ev)
	if err != nil {
		return Run{}, err
	}
	now, bound := a.clock.Now(), a.uptime()
	return call(ctx, a, now, func(b *batch) (Run, error) {
		r, err := b.owned(p, key, now)
		if err != nil {
			return Run{}, err
		}
		// A replay once the run was authorized binds nothing again, and
		// is told MayExec false.
		if r.Phase != PhaseRunAuthorized || r.Scope != ev.Name {
			if _, err := b.bindScope(p, key, permit, ev, root, now, bound); err != nil {
				return Run{}, err
			}
		}
		return b.authorizeRun(p, key, permit, now, root)
	})
}

// bindable checks what BindScope checks outside the journal: the key,
// that the caller runs as the process it registered, and that the root
// the evidence names runs as itself. It returns the root to record: ev's,
// or the caller's own.
func (a *Authority) bindable(p Principal, key string, ev ScopeEvidence) (Process, error) {
	if err := validKey(key); err != nil {
		return Process{}, err
	}
	if err := a.alive(p); err != nil {
		return Process{}, err
	}
	if ev.Root == nil {
		return p.process, nil
	}
	if err := a.runsAsItself(*ev.Root); err != nil {
		return Process{}, fmt.Errorf("attempt %s: %w", key, err)
	}
	return *ev.Root, nil
}

// bindScope is BindScope inside the batch.
// bound is the time since boot, which a consumer's record keeps as when
// it was bound.
func (b *batch) bindScope(p Principal, key string, permit Permit, ev ScopeEvidence, root Process, now time.Time, bound time.Duration) (Record, error) {
	r, err := b.owned(p, key, now)
	if err != nil {
		return Record{}, err
	}
	if !permit.matches(r.permitHash) {
		return Record{}, fmt.Errorf("attempt %s: launch permit: %w", key, ErrUnauthorized)
	}
	if r.Phase == PhaseScopeBound && r.Scope == ev.Name {
		return *r, nil
	}
	if r.Phase != PhaseLaunchCommitted || r.Scope != "" {
		return Record{}, fmt.Errorf("attempt %s is %s: %w", key, r.Phase, ErrInvalidTransition)
	}
	switch {
	case ev.Name != r.scopeName():
		return Record{}, fmt.Errorf("attempt %s: evidence is for scope %q: %w", key, ev.Name, ErrEvidence)
	case !ev.fresh(now):
		return Record{}, fmt.Errorf("attempt %s: evidence observed at %s is not fresh: %w", key, ev.ObservedAt.Format(time.RFC3339Nano), ErrEvidence)
	case !ev.Exists:
		return Record{}, fmt.Errorf("attempt %s: scope does not exist: %w", key, ErrEvidence)
	case !r.Plan.confirms(ev.Applied, r.Reservation.Quantities):
		return Record{}, fmt.Errorf("attempt %s: read-back limits do not confirm the plan: %w", key, ErrEvidence)
	}
	n := r.clone()
	applied := ev.Applied
	applied.Enforced = maps.Clone(ev.Applied.Enforced)
	n.Phase, n.Scope, n.Root, n.Applied = PhaseScopeBound, ev.Name, &root, &applied
	if n.Key != nil {
		n.BoundMS = uint64(bound.Milliseconds())
	}
	if err := b.put(r, n); err != nil {
		return Record{}, err
	}
	return *n, nil
}

// AuthorizeRun authorizes the bound process to exec (scope_bound →
// run_authorized) and returns MayExec true, once. Asking again returns
// MayExec false, so a lost answer never permits a second exec. The caller
// must be the owner that bound the scope and present the permit, and the
// process bound into the scope must still be running as itself: the
// caller's own, or the root BindScope was given.
func (a *Authority) AuthorizeRun(ctx context.Context, p Principal, key string, permit Permit) (Run, error) {
	if err := validKey(key); err != nil {
		return Run{}, err
	}
	if err := a.alive(p); err != nil {
		return Run{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Run, error) { return b.authorizeRun(p, key, permit, now, p.process) })
}

// authorizeRun is AuthorizeRun inside the batch. verified is a process
// this request found running as itself before it was queued: a bound
// root that is verified is not read again.
func (b *batch) authorizeRun(p Principal, key string, permit Permit, now time.Time, verified Process) (Run, error) {
	r, err := b.owned(p, key, now)
	if err != nil {
		return Run{}, err
	}
	if !permit.matches(r.permitHash) {
		return Run{}, fmt.Errorf("attempt %s: launch permit: %w", key, ErrUnauthorized)
	}
	if r.Phase != PhaseScopeBound && r.Phase != PhaseRunAuthorized {
		return Run{}, fmt.Errorf("attempt %s is %s: %w", key, r.Phase, ErrInvalidTransition)
	}
	if r.Root == nil || *r.Root != verified && b.a.runsAsItself(*r.Root) != nil {
		return Run{}, fmt.Errorf("attempt %s: the bound process is not running: %w", key, ErrUnauthorized)
	}
	if r.Phase == PhaseRunAuthorized {
		return Run{Record: *r}, nil
	}
	n := r.clone()
	n.Phase = PhaseRunAuthorized
	if err := b.put(r, n); err != nil {
		return Run{}, err
	}
	return Run{Record: *n, MayExec: true}, nil
}

// AbandonLaunch is the owner's report that a committed launch created
// nothing and never will: its reservation is released (no_helper_created),
// which proves the execution never started. It applies to committed,
// draining or suspect attempts with no scope; an attempt with a scope is
// settled only by that scope's end (ErrInvalidTransition), as is a
// prepared one (cancel it instead). A settled attempt is returned as it
// is.
func (a *Authority) AbandonLaunch(ctx context.Context, p Principal, key string, reason AbandonReason) (Record, error) {
	return a.abandonWith(ctx, key, reason, func(b *batch, now time.Time) (*Record, error) {
		return b.owned(p, key, now)
	})
}

// AbandonInherited is AbandonLaunch for an owner's successor: the report,
// by a later generation of the owner, that a launch an earlier generation
// committed created nothing and never will. An owner that restarts
// registers a new generation and can no longer act on its earlier
// attempts, yet it alone knows, from what it recorded before creating
// anything, that such a launch never made its scope. The attempt must be
// of p's owner, of an earlier generation whose process has ended (a
// generation still running may yet create the scope); any other is not
// found. The phases it applies to, and its answers, are AbandonLaunch's.
func (a *Authority) AbandonInherited(ctx context.Context, p Principal, key string, reason AbandonReason) (Record, error) {
	return a.abandonWith(ctx, key, reason, func(b *batch, now time.Time) (*Record, error) {
		if err := b.authorize(p); err != nil {
			return nil, err
		}
		r, err := b.load(key, now)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Owner != p.owner || r.Generation >= p.generation || !a.processGone(r.OwnerProcess) {
			return nil, fmt.Errorf("attempt %s: %w", key, ErrNotFound)
		}
		return r, nil
	})
}

// abandonWith checks an abandon report's key and reason, and in one
// request releases the attempt find returns (abandon).
func (a *Authority) abandonWith(ctx context.Context, key string, reason AbandonReason, find func(*batch, time.Time) (*Record, error)) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	if !reason.valid() {
		return Record{}, fmt.Errorf("abandon reason %q: %w", reason, ErrInvalidRequest)
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := find(b, now)
		if err != nil {
			return Record{}, err
		}
		return b.abandon(r, key, reason)
	})
}

// abandon releases r, a launch that created nothing (no_helper_created),
// for AbandonLaunch and AbandonInherited. A settled attempt is returned as
// it is; one with a scope, or prepared, is ErrInvalidTransition.
func (b *batch) abandon(r *Record, key string, reason AbandonReason) (Record, error) {
	switch {
	case r.Phase.Terminal():
		return *r, nil
	case r.Scope != "", r.Phase == PhasePrepared, r.Phase == PhaseScopeBound, r.Phase == PhaseRunAuthorized:
		return Record{}, fmt.Errorf("attempt %s is %s: %w", key, r.Phase, ErrInvalidTransition)
	}
	n := r.clone()
	n.Phase, n.Release, n.Abandoned = PhaseReleased, ReleaseNoHelperCreated, reason
	if err := b.put(r, n); err != nil {
		return Record{}, err
	}
	return *n, nil
}

// Cancel cancels an attempt: prepared → cancelled, returning its
// reservation; launch_committed, scope_bound or run_authorized → draining,
// which fences any late bind or authorization while the reservation stays
// charged until the scope ends. Draining, suspect and settled attempts
// are returned unchanged and nothing is written; a prepared attempt past
// its deadline reports that it expired.
func (a *Authority) Cancel(ctx context.Context, p Principal, key string) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.owned(p, key, now)
		if err != nil {
			return Record{}, err
		}
		var next Phase
		switch r.Phase {
		case PhasePrepared:
			next = PhaseCancelled
		case PhaseLaunchCommitted, PhaseScopeBound, PhaseRunAuthorized:
			next = PhaseDraining
		default:
			return *r, nil
		}
		n := r.clone()
		n.Phase = next
		if err := b.put(r, n); err != nil {
			return Record{}, err
		}
		return *n, nil
	})
}

// Lookup returns p's attempt key as of now.
func (a *Authority) Lookup(ctx context.Context, p Principal, key string) (Record, error) {
	return a.lookup(ctx, p, key, nil)
}

// lookup returns p's attempt key as of now, if check, when set, passes
// it.
func (a *Authority) lookup(ctx context.Context, p Principal, key string, check func(*Record) error) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.owned(p, key, now)
		if err == nil && check != nil {
			err = check(r)
		}
		if err != nil {
			return Record{}, err
		}
		return *r, nil
	})
}

// VerifyLaunch returns p's attempt key when permit is the one its launch
// was begun with, changing nothing, so that a launch can be refused
// before anything is made for it: a wrong permit, or an attempt never
// begun, is ErrUnauthorized.
func (a *Authority) VerifyLaunch(ctx context.Context, p Principal, key string, permit Permit) (Record, error) {
	return a.lookup(ctx, p, key, func(r *Record) error {
		if !permit.matches(r.permitHash) {
			return fmt.Errorf("attempt %s: launch permit: %w", key, ErrUnauthorized)
		}
		return nil
	})
}

// Reconcile settles a charged attempt on evidence of its scope, for the
// agent controller (a trusted caller: there is no principal). ev must
// name the scope of the attempt and be fresh, or it is ErrEvidence and
// nothing changes.
//
//   - A scope seen unpopulated, with its launched process known to have
//     exited, releases the attempt (scope_terminated).
//   - A bound scope that is missing is not evidence of anything: the
//     attempt becomes suspect, and stays so (scope_lost) until a reboot.
//   - An OOM kill is recorded, sticky: the run did not succeed.
//   - An unbound launch whose scope turns out to exist becomes suspect
//     with that scope, and is settled by its end; one without a scope is
//     left alone while its owner runs, and becomes suspect once the owner
//     is gone. Only the owner's AbandonLaunch releases it.
//
// Prepared and settled attempts are returned unchanged. When nothing
// changes nothing is written.
func (a *Authority) Reconcile(ctx context.Context, key string, ev ScopeEvidence) (Record, error) {
	if err := validKey(key); err != nil {
		return Record{}, err
	}
	now := a.clock.Now()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		r, err := b.load(key, now)
		if err != nil {
			return Record{}, err
		}
		if r == nil {
			return Record{}, fmt.Errorf("attempt %s: %w", key, ErrNotFound)
		}
		if !r.Phase.Charged() || r.Phase == PhasePrepared {
			return *r, nil
		}
		if ev.Name != r.scopeName() || !ev.fresh(now) {
			return Record{}, fmt.Errorf("attempt %s: evidence for %q observed at %s: %w", key, ev.Name, ev.ObservedAt.Format(time.RFC3339Nano), ErrEvidence)
		}
		n := r.clone()
		terminated := ev.Exists && !ev.Populated && ev.ProcessExited
		if ev.Exists && ev.OOMKilled {
			n.OOMKilled = true
		}
		switch {
		case r.BootID != a.bootID:
			n.Phase, n.Release = PhaseReleased, ReleasePreviousBoot
		case r.Scope != "" && !ev.Exists:
			n.Phase, n.ScopeLost = PhaseSuspect, true
		case r.Scope != "" && terminated && !r.ScopeLost:
			n.Phase, n.Release = PhaseReleased, ReleaseScopeTerminated
		case r.Scope == "" && ev.Exists:
			n.Scope = ev.Name
			n.Phase = PhaseSuspect
			if terminated {
				n.Phase, n.Release = PhaseReleased, ReleaseScopeTerminated
			}
		case r.Scope == "" && r.Phase != PhaseSuspect:
			if !a.processGone(r.OwnerProcess) {
				break
			}
			n.Phase = PhaseSuspect
		}
		if n.Phase == r.Phase && n.Scope == r.Scope && n.OOMKilled == r.OOMKilled && n.ScopeLost == r.ScopeLost {
			return *r, nil
		}
		if err := b.put(r, n); err != nil {
			return Record{}, err
		}
		return *n, nil
	})
}

// runsAsItself checks that p, a process the caller names, runs as itself
// now: in this boot, with its start time. It is ErrEvidence otherwise.
func (a *Authority) runsAsItself(p Process) error {
	if p.PID <= 0 || p.BootID != a.bootID {
		return fmt.Errorf("process %d is not of this boot: %w", p.PID, ErrEvidence)
	}
	start, err := a.inspector.StartTime(p.PID)
	if errors.Is(err, ErrNoProcess) || (err == nil && start != p.StartTime) {
		return fmt.Errorf("process %d is not running as itself: %w", p.PID, ErrEvidence)
	}
	return err
}

// processGone reports whether p has certainly ended. A failed read is not
// proof.
func (a *Authority) processGone(p Process) bool {
	if p.BootID != a.bootID {
		return true
	}
	start, err := a.inspector.StartTime(p.PID)
	return errors.Is(err, ErrNoProcess) || (err == nil && start != p.StartTime)
}
