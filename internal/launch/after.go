package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/isolation"
	"github.com/marshal-dev/marshal/internal/scope"
)

// Info is what the Launcher knows of a launch, for the controllers and
// the egress proxy.
type Info struct {
	// ID is the scope's 32 hex digits.
	ID      string
	Profile string
	// Workspace is "" for a launch of a consumer of DevGuard's wire,
	// whose Consumer is set instead.
	Workspace string
	Consumer  string
	// Attempt is the attempt bound to the scope, "" when unaccounted.
	Attempt string
	// PID is the launched process.
	PID int
	// Path is the scope's cgroup2 path, "" until the scope exists.
	Path string
	// Isolated reports that the launch runs in a network namespace of its
	// own (NetNS).
	Isolated bool
}

func (st *launchState) info() Info {
	return Info{
		ID: st.rec.ID, Profile: st.rec.Profile, Workspace: st.rec.Workspace, Consumer: st.rec.Consumer, Attempt: st.rec.Attempt, PID: st.rec.PID, Path: st.path,
		Isolated: st.rec.Isolation == v1alpha1.IsolationNetns,
	}
}

// NetNS returns the network namespace the launch of id was given, the one
// its connections to the egress proxy must come from: the host's (host)
// for a launch in the host's; for one under netns isolation, the one its
// launched process made before it became the agent, recorded the first
// time it is asked for once the process is out of the host's, and held
// open until the launch is forgotten, so that no later namespace takes
// its identity. ok is false when no launch recorded id, or the launch's
// namespace is not known: not made yet, or its process gone first.
func (l *Launcher) NetNS(id string, host identity.NetNS) (identity.NetNS, bool) {
	l.mu.Lock()
	st := l.launches[id]
	if st == nil {
		l.mu.Unlock()
		return identity.NetNS{}, false
	}
	if st.rec.Isolation != v1alpha1.IsolationNetns {
		l.mu.Unlock()
		return host, true
	}
	ns, proc := st.netns, st.proc
	l.mu.Unlock()
	if !ns.IsZero() {
		return ns, true
	}
	if proc == nil {
		return identity.NetNS{}, false
	}
	f, ns, err := proc.openNetNS()
	if err != nil {
		return identity.NetNS{}, false
	}
	if ns == host {
		// Not made yet: the launched process has not become the agent.
		f.Close()
		return identity.NetNS{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !st.netns.IsZero() || l.launches[id] != st {
		f.Close()
		return st.netns, !st.netns.IsZero()
	}
	st.netns, st.netnsFile = ns, f
	return ns, true
}

// Info returns what is known of the launch whose scope has ID id, and
// false when no launch recorded it.
func (l *Launcher) Info(id string) (Info, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.launches[id]
	if st == nil {
		return Info{}, false
	}
	return st.info(), true
}

// Launches returns what is known of every launch recorded, in no order.
func (l *Launcher) Launches() []Info {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Info, 0, len(l.launches))
	for _, st := range l.launches {
		out = append(out, st.info())
	}
	return out
}

// Launched reports whether marshald launched the scope id names, and what
// is known of that launch: a launch of id.ID was recorded, it is of
// id.Profile, and its scope is at id.Path (when both paths are known: a
// scope being made has none yet, a scope gone from the tree neither).
//
// It is the one answer to "is this an agent marshald launched?", and
// whatever decides on identity reads it, never the scope's name alone: a
// group named marshal-<profile>-<id>.scope is made by anyone who can
// write the cgroup tree, so a scope that fails it (no such launch, one of
// another profile, or at another path) is foreign and belongs to no
// workspace. It does not see a process moved into a launched scope by
// the same uid: that process is the scope's as far as the kernel says
// (only a network namespace of the launch's own would tell them apart).
func (l *Launcher) Launched(id scope.Identity) (Info, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.launches[id.ID]
	if st == nil || st.rec.Profile != id.Profile {
		return Info{}, false
	}
	if st.path != "" && id.Path != "" && st.path != id.Path {
		return Info{}, false
	}
	return st.info(), true
}

// Settle reports whether the launch of scope sc is over: its scope read
// empty now, and its launched process known to have exited (its pidfd
// says so; after a restart, the process recorded was gone). Only then,
// and when the launch has an attempt, it reconciles the attempt with that
// evidence, before anything removes the scope. The scope is read where
// its launch made it (sc.Path when that is not known); a scope that is
// gone was last seen empty at emptiedAt, when not zero, which stands as
// the evidence if fresh enough (a systemd scope removes itself once
// empty). The evidence says whether the kernel OOM-killed a process of
// the scope, when the scope is still there to tell. A launch still in
// progress, or still running, is not over: false, nil. A scope no launch
// recorded is over.
//
// A charged launch whose scope is gone with nothing to say it was seen
// empty is not judged at once: the tree observer's report of the scope
// may be on its way (systemd removes a scope as soon as it is empty, and
// tells of it after), and the attempt would stay charged until a reboot
// if it were judged lost first. retry says when to ask again, if that
// report has not brought the caller back before; after
// awaitReportFor, the attempt is reconciled on the scope lost.
func (l *Launcher) Settle(ctx context.Context, sc cgroup.Scope, emptiedAt time.Time) (over bool, retry time.Duration, err error) {
	return l.settle(ctx, sc, emptiedAt, true)
}

// awaitReportFor is how long Settle waits for the tree observer's report
// of a charged launch's scope found gone: well beyond the manager's and
// the observer's latency on a busy host, and short enough that a scope
// truly lost gives back its launch's slot soon.
const awaitReportFor = 5 * time.Second

// settle is Settle; await false judges a scope gone at once, for an owner
// who asks for an observation now.
func (l *Launcher) settle(ctx context.Context, sc cgroup.Scope, emptiedAt time.Time, await bool) (bool, time.Duration, error) {
	l.mu.Lock()
	st := l.launches[sc.ID]
	var (
		rec       Record
		path      = sc.Path
		proc      *Process
		launching bool
	)
	if st != nil {
		rec, proc, launching = st.rec, st.proc, st.launching
		if st.path != "" {
			path = st.path
		}
	}
	l.mu.Unlock()
	if st == nil {
		return true, 0, nil
	}
	if launching || proc != nil && !proc.Exited() {
		return false, 0, nil
	}
	ev := admission.ScopeEvidence{Name: rec.Scope(), ObservedAt: l.clock.Now(), ProcessExited: true}
	if path != "" {
		events, err := cgroup.ReadEvents(filepath.Join(l.mount, path))
		switch {
		case errors.Is(err, cgroup.ErrNotFound):
		case err != nil:
			return false, 0, fmt.Errorf("launch %s: %w", rec.ID, err)
		default:
			ev.Exists, ev.Populated = true, events.Populated
		}
	}
	if ev.Populated {
		return false, 0, nil
	}
	if !ev.Exists && !emptiedAt.IsZero() && ev.ObservedAt.Sub(emptiedAt) <= admission.MaxEvidenceAge {
		ev.Exists, ev.ObservedAt = true, emptiedAt
	}
	if !ev.Exists && rec.Attempt != "" && await {
		if retry := l.awaitReport(st, ev.ObservedAt); retry > 0 {
			return false, retry, nil
		}
	}
	exit := l.exitOf(ctx, rec, proc, path)
	l.mu.Lock()
	st.exit = &exit
	l.mu.Unlock()
	if rec.Attempt == "" {
		return true, 0, nil
	}
	ev.OOMKilled = exit.OOMKills > 0
	r, err := l.auth.Reconcile(ctx, rec.Attempt, ev)
	switch {
	case errors.Is(err, admission.ErrNotFound):
		return true, 0, nil
	case err != nil:
		return false, 0, fmt.Errorf("launch %s: reconciling its attempt: %w", rec.ID, err)
	case r.Phase.Charged():
		// Only a reboot settles it now (a bound scope that vanished);
		// the scope can go.
		l.log.Warn("attempt still charged after its scope ended", "attempt", rec.Attempt, "phase", r.Phase, "scope_lost", r.ScopeLost)
	}
	return true, 0, nil
}

// awaitReport notes when st's scope was first found gone without
// evidence, and returns how much longer to wait for the observer's
// report of it; zero once awaitReportFor has passed.
func (l *Launcher) awaitReport(st *launchState, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.goneAt.IsZero() {
		st.goneAt = now
	}
	return max(0, awaitReportFor-now.Sub(st.goneAt))
}

// exitOf reads how the launch of rec ended: its process's wait status,
// when the kernel still tells it, and the OOM kills of its scope at path,
// read before anything removes the scope. A scope whose usage cannot be
// read shows none.
func (l *Launcher) exitOf(ctx context.Context, rec Record, proc *Process, path string) Exit {
	var exit Exit
	if proc != nil {
		exit.Status, exit.Known = proc.ExitStatus()
	}
	if path == "" {
		return exit
	}
	sc := cgroup.Scope{Name: rec.Scope(), Profile: rec.Profile, ID: rec.ID, Path: path}
	u, err := l.scopes.Usage(ctx, sc)
	if err != nil {
		if !errors.Is(err, cgroup.ErrNotFound) {
			l.log.Warn("reading the usage of an ended scope", "scope", sc.Name, "err", err)
		}
		return exit
	}
	exit.OOMKills = u.OOMKills
	return exit
}

// Ended returns how the launch whose scope has ID id ended, once Settle
// found it over, and false before (or for a launch not known). It is what
// the agent controller says of an agent's exit, read before the launch
// is forgotten.
func (l *Launcher) Ended(id string) (Exit, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.launches[id]
	if st == nil || st.exit == nil {
		return Exit{}, false
	}
	return *st.exit, true
}

// Forget ends the launch whose scope has ID id, once its scope is gone:
// its record is deleted, its slot freed and its process released. A
// launch not known is no error; a record that cannot be deleted is, and
// the launch is kept.
func (l *Launcher) Forget(ctx context.Context, id string) error {
	l.mu.Lock()
	st := l.launches[id]
	l.mu.Unlock()
	if st == nil {
		return nil
	}
	// The temporary directory a confined launch had, made by the helper
	// as the launch's user, goes first: a record kept tries again.
	if err := os.RemoveAll(isolation.TmpDir(id)); err != nil {
		return fmt.Errorf("launch %s: removing its temporary directory: %w", id, err)
	}
	if err := l.store.Delete(ctx, id); err != nil {
		return fmt.Errorf("launch %s: %w", id, err)
	}
	l.mu.Lock()
	if l.launches[id] == st {
		delete(l.launches, id)
	}
	l.mu.Unlock()
	st.proc.Close()
	l.mu.Lock()
	if st.netnsFile != nil {
		st.netnsFile.Close()
		st.netnsFile = nil
	}
	l.mu.Unlock()
	st.slot.Free()
	l.poke()
	return nil
}

// Reserved returns the slots of workspace held for processes not yet
// created.
func (l *Launcher) Reserved(workspace string) int64 { return l.slots.Reserved(workspace) }

// launched marks the launch of id as no longer in progress, re-arms the
// timeouts and tells the controllers to look at its scope again.
func (l *Launcher) launched(id, scope string) {
	l.mu.Lock()
	if st := l.launches[id]; st != nil {
		st.launching = false
	}
	l.mu.Unlock()
	l.poke()
	l.notify(scope)
}

// watch waits in the background for the launched process p to exit, and
// then tells the controllers to look at its scope.
func (l *Launcher) watch(p *Process, scope string) {
	l.goBackground(func(ctx context.Context) {
		if err := p.Wait(ctx); err != nil {
			return // stopped, or the launch was forgotten
		}
		l.notify(scope)
	})
}

// nextDeadline returns the earliest timeout of a launch whose scope was
// not killed yet.
func (l *Launcher) nextDeadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Time
	for _, st := range l.launches {
		d := st.rec.Deadline
		if d.IsZero() || st.launching || st.killed {
			continue
		}
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next, !next.IsZero()
}

// expire kills the scope of every launch whose timeout has passed.
func (l *Launcher) expire(ctx context.Context) {
	now := l.clock.Now()
	var due []Record
	l.mu.Lock()
	for _, st := range l.launches {
		if d := st.rec.Deadline; !d.IsZero() && !st.launching && !st.killed && !now.Before(d) {
			st.killed = true
			due = append(due, st.rec)
		}
	}
	l.mu.Unlock()
	for _, rec := range due {
		if err := l.scopes.Kill(ctx, cgroup.Scope{Name: rec.Scope(), Profile: rec.Profile, ID: rec.ID}); err != nil && ctx.Err() == nil {
			l.log.Warn("killing a launch whose timeout expired", "scope", rec.Scope(), "err", err)
		}
	}
}
