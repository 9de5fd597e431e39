package launch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/scope"
)

// HelperLaunch is a launch helper's presentation of its owner's grant:
// DevGuard's fenced launch, where the owner (a consumer's instance)
// begins the launch itself and starts a helper that presents the
// attempt's key and permit to marshald.
type HelperLaunch struct {
	// Owner is the principal of the instance that owns the attempt.
	Owner admission.Principal
	Key   admission.AttemptKey
	// Permit is the one the owner's BeginLaunch answered.
	Permit admission.Permit
	// Helper is the presenting process, pinned. The launch owns it from
	// then on: it is released when the launch is refused or forgotten.
	Helper *Process
}

// LaunchHelper launches the owner's attempt for its helper, by the steps
// every launch takes: the attempt, committed by its owner under the
// permit, is recorded as a launch in no workspace, its scope is made
// with the helper moved in and the plan's limits set (enter), and bound
// on what reading it back showed, the run authorized in the same request
// (bind). The helper then execs, already inside its scope.
//
// The helper must be a live child of the owner's process, of the owner's
// uid (ErrNotOwnersChild), and present the attempt's permit
// (admission.ErrUnauthorized). A launch that is no longer committed (not
// begun, cancelled, released) is admission.ErrInvalidTransition, as is
// one another helper claimed (ErrClaimed wrapped). The same helper
// presenting again after a lost answer is answered MayExec false, and so
// never execs twice. A refusal before the scope exists leaves the grant
// unclaimed, for its owner to abandon; one after kills the helper, and
// the attempt, cancelled, drains until its scope's end settles it.
func (l *Launcher) LaunchHelper(ctx context.Context, h HelperLaunch) (run admission.Run, err error) {
	select {
	case <-l.ready:
	default:
		h.Helper.Close()
		return admission.Run{}, ErrNotRunning
	}
	var rb rollback
	var ref *Refusal
	defer rb.unwind(&ref)
	rb.push(func(*Refusal) { h.Helper.Close() })
	fail := func(e error) (admission.Run, error) {
		ref = &Refusal{cause: e}
		return admission.Run{}, e
	}
	ctx = context.WithoutCancel(ctx)
	owner, _ := h.Owner.Instance()
	if err := l.ownersChild(owner.Process, h.Helper); err != nil {
		return fail(err)
	}
	id := h.Key.ID()
	actx, cancel := l.authCtx(ctx)
	r, err := l.auth.VerifyLaunch(actx, h.Owner, id, h.Permit)
	cancel()
	if err != nil {
		return fail(err)
	}
	helper := admission.Process{UID: h.Helper.UID, PID: h.Helper.PID, StartTime: h.Helper.StartTime, BootID: l.bootID}
	switch {
	case (r.Phase == admission.PhaseRunAuthorized || r.Phase == admission.PhaseScopeBound) && r.Root != nil && *r.Root == helper:
		// The same helper again, after a lost answer: never a second
		// exec.
		h.Helper.Close()
		rb.commit()
		return admission.Run{Record: r}, nil
	case r.Phase != admission.PhaseLaunchCommitted || r.Scope != "":
		return fail(fmt.Errorf("attempt %s is %s: %w", id, r.Phase, admission.ErrInvalidTransition))
	}
	if err := l.helperIsolation(r.Intent.Profile, h.Helper.UID); err != nil {
		return fail(err)
	}
	now := l.clock.Now()
	rec := Record{
		ID: id, Profile: r.Intent.Profile, Attempt: id, Consumer: h.Key.ConsumerID,
		PID: h.Helper.PID, UID: h.Helper.UID, StartTime: h.Helper.StartTime, BootID: l.bootID, Started: now,
	}
	if !l.claim(id) {
		return fail(fmt.Errorf("attempt %s: %w: %w", id, ErrClaimed, admission.ErrInvalidTransition))
	}
	defer l.unclaim(id)
	if err := l.store.Put(ctx, rec); err != nil {
		return fail(fmt.Errorf("recording the launch of %s: %w", id, err))
	}
	rb.push(func(*Refusal) {
		if err := l.store.Delete(ctx, id); err != nil {
			l.log.Warn("deleting a launch record", "id", id, "err", err)
		}
	})
	sc, applied, err := l.enter(ctx, &rb, rec, h.Helper, nil, planLimits(*r.Plan, r.Reservation.Quantities))
	if errors.Is(err, ErrClaimed) {
		return fail(fmt.Errorf("%w: %w", err, admission.ErrInvalidTransition))
	}
	if err != nil {
		return fail(fmt.Errorf("making the scope of %s: %w", id, err))
	}
	// The scope exists: the launch is kept until its end, whatever comes.
	rb.commit()
	defer l.launched(id, sc.Name)
	return l.bindHelper(ctx, h, id, *r.Plan, sc, applied)
}

// bindHelper binds the helper's run to its scope sc, which exists; a
// helper refused there is killed and its attempt cancelled.
func (l *Launcher) bindHelper(ctx context.Context, h HelperLaunch, id string, plan admission.Plan, sc cgroup.Scope, applied cgroup.Applied) (admission.Run, error) {
	run, err := l.bind(ctx, h.Owner, id, h.Permit, plan, h.Helper, sc, applied)
	if err == nil && run.MayExec {
		return run, nil
	}
	if err == nil {
		err = fmt.Errorf("attempt %s: run already authorized: %w", id, admission.ErrInvalidTransition)
	}
	// The helper must not go on: it is killed, and the attempt drains
	// until the scope's end is seen.
	if kerr := l.scopes.Kill(ctx, sc); kerr != nil {
		l.log.Warn("killing a refused helper's scope", "scope", sc.Name, "err", kerr)
	}
	actx, cancel := l.authCtx(ctx)
	if _, cerr := l.auth.Cancel(actx, h.Owner, id); cerr != nil {
		l.log.Warn("cancelling a refused helper's attempt", "attempt", id, "err", cerr)
	}
	cancel()
	return admission.Run{}, err
}

// claim marks attempt id as being launched by a helper, or reports false
// when one is already: two helpers of one grant never both write its
// launch's record.
func (l *Launcher) claim(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.claims[id] || l.launches[id] != nil {
		return false
	}
	l.claims[id] = true
	return true
}

func (l *Launcher) unclaim(id string) {
	l.mu.Lock()
	delete(l.claims, id)
	l.mu.Unlock()
}

// ownersChild checks that helper is a live child of owner's process and
// of its uid: only the running owner can have started the helper of its
// grant.
func (l *Launcher) ownersChild(owner admission.Process, helper *Process) error {
	if helper.Exited() {
		return fmt.Errorf("helper %d has exited: %w", helper.PID, ErrNotOwnersChild)
	}
	if helper.UID != owner.UID || owner.BootID != l.bootID {
		return fmt.Errorf("helper %d is of uid %d, its owner of uid %d: %w", helper.PID, helper.UID, owner.UID, ErrNotOwnersChild)
	}
	parent, err := parentOf(helper.PID)
	if err != nil || parent != owner.PID {
		return fmt.Errorf("helper %d is not a child of its owner %d: %w", helper.PID, owner.PID, ErrNotOwnersChild)
	}
	if start, err := startTimeOf(owner.PID); err != nil || start != owner.StartTime {
		return fmt.Errorf("the owner %d of helper %d is not running as itself: %w", owner.PID, helper.PID, ErrNotOwnersChild)
	}
	return nil
}

// parentOf reads a process's parent from /proc/<pid>/stat.
func parentOf(pid int) (int, error) {
	st, err := identity.ReadStat(identity.StatPath(pid))
	return st.Parent, err
}

func startTimeOf(pid int) (uint64, error) {
	st, err := identity.ReadStat(identity.StatPath(pid))
	return st.StartTime, err
}

// Observe settles the attempt of the launch of id on its scope read now,
// as the agent controller would (Settle), for an owner who asks; nothing
// is removed. It is ErrUnknownLaunch when no launch of id is known.
func (l *Launcher) Observe(ctx context.Context, id string) error {
	l.mu.Lock()
	st := l.launches[id]
	var sc cgroup.Scope
	if st != nil {
		sc = cgroup.Scope{Name: st.rec.Scope(), Profile: st.rec.Profile, ID: id, Path: st.path}
	}
	l.mu.Unlock()
	if st == nil {
		return fmt.Errorf("launch %s: %w", id, ErrUnknownLaunch)
	}
	over, _, err := l.settle(ctx, sc, time.Time{}, false)
	if over {
		l.notify(sc.Name)
	}
	return err
}

// Signal sends sig to every process of the scope of the launch of id and
// returns how many were signalled and whether every one that is in the
// scope could be. Each is pinned by a pidfd and found still in the scope
// before it is signalled, so that a pid reused since the scope was read
// is never signalled. A launch not known, or without its scope yet, is
// ErrUnknownLaunch; a scope already gone signals nothing, completely.
func (l *Launcher) Signal(ctx context.Context, id string, sig syscall.Signal) (signalled int, complete bool, err error) {
	l.mu.Lock()
	st := l.launches[id]
	var path, name string
	if st != nil {
		path, name = st.path, st.rec.Scope()
	}
	l.mu.Unlock()
	if st == nil || path == "" {
		return 0, false, fmt.Errorf("launch %s: %w", id, ErrUnknownLaunch)
	}
	complete = true
	err = cgroup.WalkGroups(filepath.Join(l.mount, path), func(group string) error {
		pids, err := cgroup.ReadProcs(group)
		if errors.Is(err, cgroup.ErrNotFound) {
			return nil
		}
		if err != nil {
			complete = false
			return nil
		}
		for _, pid := range pids {
			switch ok, err := signalMember(pid, name, sig); {
			case err != nil:
				complete = false
			case ok:
				signalled++
			}
		}
		return nil
	})
	if errors.Is(err, cgroup.ErrNotFound) {
		return signalled, complete, nil
	}
	return signalled, complete, err
}

// signalMember signals pid, when it is still a member of scope name once
// pinned; a process that has gone is not signalled, and no error.
func signalMember(pid int, name string, sig syscall.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	id, err := identity.Resolve(pid)
	if errors.Is(err, identity.ErrNoProcess) || errors.Is(err, identity.ErrNotManaged) {
		return false, nil
	}
	if err != nil || scope.ScopeName(id.Profile, id.ID) != name {
		// Left the scope, or never was in it.
		return false, err
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// helperIsolation refuses a helper's launch under a profile that asks for
// netns isolation, which the launch helper does not give (it execs its
// program itself): such a launch never runs with less than its profile
// asks.
func (l *Launcher) helperIsolation(profile string, uid uint32) error {
	if l.network == nil {
		return nil
	}
	w := &v1alpha1.Workspace{Spec: v1alpha1.WorkspaceSpec{Profile: profile}}
	n, err := l.network(w, uid)
	switch {
	case err != nil && !errors.Is(err, ErrNoEgressProxy):
		return fmt.Errorf("profile %s: %w", profile, err)
	case n.Netns != nil:
		return fmt.Errorf("profile %s: %w", profile, ErrIsolationNotGiven)
	}
	return nil
}
