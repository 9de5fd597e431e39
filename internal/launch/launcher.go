package launch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/isolation"
)

// Authority is what the launch path asks of the admission authority:
// the three parts below, each owned by the step that uses it;
// *admission.Authority is one. Each method's contract is the authority's.
type Authority interface {
	Admissions
	Commitments
	Recovery
}

// Admissions is what preparing an execution asks: its attempt admitted,
// looked up once after an unknown answer, cancelled when it is not
// launched; and the snapshot that a denial and an explanation are told
// from.
type Admissions interface {
	Admit(ctx context.Context, p admission.Principal, key, digest string, intent admission.Intent) (admission.Record, error)
	Lookup(ctx context.Context, p admission.Principal, key string) (admission.Record, error)
	Cancel(ctx context.Context, p admission.Principal, key string) (admission.Record, error)
	Snapshot() admission.Snapshot
}

// Commitments is what launching asks: the launch begun (a prepared
// attempt's) or admitted and begun at once, its scope bound and its run
// authorized, or the launch abandoned when it made nothing.
type Commitments interface {
	BeginLaunch(ctx context.Context, p admission.Principal, key string) (admission.Launch, error)
	AdmitLaunch(ctx context.Context, p admission.Principal, key, digest string, intent admission.Intent) (admission.Launch, error)
	BindAndAuthorize(ctx context.Context, p admission.Principal, key string, permit admission.Permit, ev admission.ScopeEvidence) (admission.Run, error)
	AbandonLaunch(ctx context.Context, p admission.Principal, key string, reason admission.AbandonReason) (admission.Record, error)
	// VerifyLaunch checks a launch helper's permit before anything is
	// made for it.
	VerifyLaunch(ctx context.Context, p admission.Principal, key string, permit admission.Permit) (admission.Record, error)
}

// Recovery is what owning launches across restarts asks: the owner's
// generation registered, the attempts an earlier generation left charged
// found and abandoned when they made nothing, and an attempt reconciled
// with the evidence of its ended scope.
type Recovery interface {
	Register(ctx context.Context, owner string, generation uint64, peer admission.Peer) (admission.Principal, error)
	Charged(ctx context.Context) ([]admission.Record, error)
	AbandonInherited(ctx context.Context, p admission.Principal, key string, reason admission.AbandonReason) (admission.Record, error)
	Reconcile(ctx context.Context, key string, ev admission.ScopeEvidence) (admission.Record, error)
}

var _ Authority = (*admission.Authority)(nil)

// Scopes is the part of the cgroup backend the launch path uses; every
// cgroup.Backend is one.
type Scopes interface {
	CreateScope(ctx context.Context, profile, id string, pid int, limits cgroup.Limits) (cgroup.Scope, cgroup.Applied, error)
	ListScopes(ctx context.Context) ([]cgroup.Scope, error)
	Kill(ctx context.Context, s cgroup.Scope) error
	// Usage is read when a launch ends, for its OOM kills.
	Usage(ctx context.Context, s cgroup.Scope) (cgroup.Usage, error)
}

// Workspaces says what is declared.
type Workspaces interface {
	// Workspace returns the declared workspace name, defaulted, and
	// whether its status says Ready; ok is false when it is not declared.
	Workspace(name string) (w *v1alpha1.Workspace, ready, ok bool)
}

// Metrics records what the launch path observes; *metrics.Metrics is
// one. Results are enumerations.
type Metrics interface {
	ObserveAdmission(result string)
	ObserveLaunch(result string, d time.Duration)
}

// DefaultOwner is the owner name a Launcher registers with the authority:
// the daemon is the long-lived launcher that owns every attempt.
const DefaultOwner = "marshald"

// DefaultAuthorityTimeout bounds each request to the authority; an answer
// that does not come in time is an unknown outcome.
const DefaultAuthorityTimeout = 5 * time.Second

// Options configure a Launcher. Authority, Scopes, Store and Workspaces
// are required.
type Options struct {
	Authority  Authority
	Scopes     Scopes
	Store      Store
	Workspaces Workspaces
	// CgroupMount is the cgroup2 mount point, which scopes' paths are
	// relative to: a scope's cgroup.events is read there as evidence.
	// Found in /proc/self/mountinfo by default.
	CgroupMount string
	// Metrics, when set, records admissions and launches.
	Metrics Metrics
	// Clock times deadlines and timeouts; the real clock by default.
	Clock clock.WithTicker
	// Inspector gives the boot ID; admission.Procfs by default.
	Inspector admission.Inspector
	// Owner is the owner name to register; DefaultOwner by default.
	Owner string
	// Self is the owner's process, as SO_PEERCRED would name it to the
	// authority: this process by default.
	Self admission.Peer
	// AuthorityTimeout bounds each request to the authority;
	// DefaultAuthorityTimeout by default.
	AuthorityTimeout time.Duration
	// OnScope, when set, is called with the unit name of a launch's scope
	// when something the cgroup tree does not show changed: its process
	// exited, or its launch finished (the agent controller enqueues it).
	OnScope func(scope string)
	// OnWorkspace, when set, is called with a workspace whose slot counts
	// changed.
	OnWorkspace func(workspace string)
	// Network, when set, says how the executions of workspace w that a
	// caller of uid asks for reach the network: the environment their
	// profile's egress gives them over the workspace's exec.env (the
	// egress proxy's variables), part of the execution's meaning, and
	// whether they run under netns isolation. An error refuses the launch
	// before anything is asked: ErrNoEgressProxy when the proxy cannot be
	// offered, one wrapping isolation.ErrUnavailable when netns isolation
	// cannot be had here. Without it executions get the host's network.
	Network func(w *v1alpha1.Workspace, uid uint32) (Network, error)
	// Logger receives what goes wrong in the background; discarded by
	// default.
	Logger *slog.Logger
}

// Launcher launches executions and keeps each launch until its process
// tree is gone. Create it with New and run it with Run; its methods are
// safe for concurrent use.
type Launcher struct {
	auth       Authority
	scopes     Scopes
	store      Store
	workspaces Workspaces
	mount      string
	metrics    Metrics
	clock      clock.WithTicker
	owner      string
	self       admission.Peer
	timeout    time.Duration
	onScope    func(string)
	network    func(*v1alpha1.Workspace, uint32) (Network, error)
	log        *slog.Logger
	bootID     string
	slots      *Slots

	// ready is closed once Run registered and recovered; done once Run
	// returned. principal and generation are set before ready closes and
	// never change after.
	ready      chan struct{}
	done       chan struct{}
	principal  admission.Principal
	generation uint64

	// wake asks Run's loop to look at the deadlines again.
	wake chan struct{}
	// wg counts the background goroutines: exit watchers, and the
	// cancellations of dropped executions.
	wg sync.WaitGroup

	// mu guards the fields that follow.
	mu       sync.Mutex
	launches map[string]*launchState
	// claims are the attempts a launch helper is being launched for.
	claims map[string]bool
	// bg is Run's context, for background work, and stopped is set once
	// Run is stopping: no background work starts then.
	bg      context.Context
	stopped bool
}

// launchState is what the Launcher keeps of one launch.
type launchState struct {
	rec Record
	// path is the scope's cgroup2 path, once it exists.
	path string
	proc *Process // nil when the process was gone when it was recovered
	slot *Slot
	// launching is set while Launch runs: the launch is not settled then.
	launching bool
	// killed is set once the timeout killed the scope.
	killed bool
	// exit is how the launch ended, once Settle found it over.
	exit *Exit
	// goneAt is when Settle first found the scope gone with nothing to
	// say it was seen empty.
	goneAt time.Time
	// netns is the network namespace of a launch under netns isolation,
	// once known; netnsFile holds it open.
	netns     identity.NetNS
	netnsFile *os.File
}

// New returns a Launcher; Run must then run it.
func New(opts Options) (*Launcher, error) {
	if opts.Authority == nil || opts.Scopes == nil || opts.Store == nil || opts.Workspaces == nil {
		return nil, fmt.Errorf("Authority, Scopes, Store and Workspaces are required: %w", ErrInvalidOptions)
	}
	l := &Launcher{
		auth:       opts.Authority,
		scopes:     opts.Scopes,
		store:      opts.Store,
		workspaces: opts.Workspaces,
		mount:      opts.CgroupMount,
		metrics:    opts.Metrics,
		clock:      opts.Clock,
		owner:      opts.Owner,
		self:       opts.Self,
		timeout:    opts.AuthorityTimeout,
		onScope:    opts.OnScope,
		network:    opts.Network,
		log:        opts.Logger,
		slots:      NewSlots(opts.OnWorkspace),
		ready:      make(chan struct{}),
		done:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		launches:   map[string]*launchState{},
		claims:     map[string]bool{},
	}
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	if l.owner == "" {
		l.owner = DefaultOwner
	}
	if l.self.PID == 0 {
		l.self = admission.Peer{UID: uint32(os.Geteuid()), PID: os.Getpid()}
	}
	if l.timeout <= 0 {
		l.timeout = DefaultAuthorityTimeout
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.mount == "" {
		m, err := cgroup.ReadMounts()
		if err != nil {
			return nil, fmt.Errorf("launch: %w", err)
		}
		l.mount = m.V2
	}
	insp := opts.Inspector
	if insp == nil {
		insp = admission.Procfs{}
	}
	boot, err := insp.BootID()
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	l.bootID = boot
	return l, nil
}

// Slots returns the workspaces' live-process slots.
func (l *Launcher) Slots() *Slots { return l.slots }

// Ready returns a channel closed once the Launcher has registered with
// the authority and recovered the launches of an earlier run.
func (l *Launcher) Ready() <-chan struct{} { return l.ready }

// Generation returns the owner generation the Launcher registered, 0
// before it is ready.
func (l *Launcher) Generation() uint64 {
	select {
	case <-l.ready:
		return l.generation
	default:
		return 0
	}
}

// Run registers the Launcher with the authority (the owner's next
// generation, kept by the Store), recovers the launches of an earlier
// run from their records, and then kills the scopes whose timeout
// expires, until ctx ends. It returns nil then, once its background work
// stopped; it returns an error when it cannot register or recover, and
// the Launcher refuses every launch.
func (l *Launcher) Run(ctx context.Context) error {
	defer close(l.done)
	defer l.wg.Wait()
	defer func() {
		l.mu.Lock()
		l.stopped = true
		l.mu.Unlock()
	}()
	if err := l.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	timer := l.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var expiry <-chan time.Time
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		if next, ok := l.nextDeadline(); ok {
			d := next.Sub(l.clock.Now())
			if d <= 0 {
				l.expire(ctx)
				continue
			}
			timer.Reset(d)
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.wake:
		case <-expiry:
			l.expire(ctx)
		}
	}
}

// start registers and recovers, then opens the Launcher for launches.
func (l *Launcher) start(ctx context.Context) error {
	gen, err := l.store.NextGeneration(ctx, l.owner)
	if err != nil {
		return fmt.Errorf("launch: owner generation: %w", err)
	}
	p, err := l.auth.Register(ctx, l.owner, gen, l.self)
	if err != nil {
		return fmt.Errorf("launch: registering %s generation %d with the admission authority: %w", l.owner, gen, err)
	}
	l.principal, l.generation = p, gen
	l.mu.Lock()
	l.bg = ctx
	l.mu.Unlock()
	if err := l.recover(ctx); err != nil {
		return fmt.Errorf("launch: recovering launches: %w", err)
	}
	close(l.ready)
	return nil
}

// recover takes over the launches an earlier run recorded. A launch whose
// scope lives holds its slot again, its process pinned by its recorded
// start time, its timeout re-armed. A launch whose scope is gone is
// settled: its attempt is reconciled on the scope's absence, and one that
// never made its scope is abandoned; its record is deleted. An attempt
// of an earlier generation that was committed without a record never made
// a scope either (the record is written before the scope is created), and
// is abandoned too. Prepared attempts are left to expire.
func (l *Launcher) recover(ctx context.Context) error {
	recs, err := l.store.List(ctx)
	if err != nil {
		return err
	}
	scopes, err := l.scopes.ListScopes(ctx)
	if err != nil {
		return err
	}
	live := make(map[string]string, len(scopes))
	for _, sc := range scopes {
		live[sc.Name] = sc.Path
	}
	recorded := make(map[string]bool, len(recs))
	var kept, ended, abandoned int
	defer func() {
		if kept+ended+abandoned > 0 {
			l.log.Info("recovered the launches of an earlier run", "live", kept, "ended", ended, "abandoned", abandoned)
		}
	}()
	for _, rec := range recs {
		recorded[rec.ID] = true
		if rec.Attempt != "" {
			recorded[rec.Attempt] = true
		}
		path, ok := live[rec.Scope()]
		if !ok {
			l.settleLost(ctx, rec)
			if err := l.store.Delete(ctx, rec.ID); err != nil {
				return err
			}
			ended++
			continue
		}
		st := &launchState{rec: rec, path: path}
		if rec.Workspace != "" {
			st.slot = l.slots.restore(rec.Workspace)
		}
		if rec.BootID == l.bootID {
			p, err := Pin(rec.PID, rec.UID, rec.StartTime)
			switch {
			case err == nil:
				st.proc = p
			case !errors.Is(err, ErrProcessGone):
				return err
			}
		}
		kept++
		l.mu.Lock()
		l.launches[rec.ID] = st
		l.mu.Unlock()
		if st.proc != nil {
			l.watch(st.proc, rec.Scope())
		}
	}
	charged, err := l.auth.Charged(ctx)
	if err != nil {
		return err
	}
	for _, r := range charged {
		if r.Owner != l.owner || r.Generation >= l.generation || r.Phase == admission.PhasePrepared || r.Scope != "" || recorded[r.ID] {
			continue
		}
		if _, err := l.auth.AbandonInherited(ctx, l.principal, r.ID, admission.AbandonSpawnFailed); err != nil {
			l.log.Warn("abandoning an unrecorded launch of an earlier run", "attempt", r.ID, "err", err)
			continue
		}
		abandoned++
	}
	return nil
}

// settleLost settles the attempt of a recorded launch whose scope is gone:
// reconciled on the scope's absence (a bound scope that vanished is not
// evidence: the attempt stays suspect), and abandoned when it never bound
// a scope.
func (l *Launcher) settleLost(ctx context.Context, rec Record) {
	if rec.Attempt == "" {
		return
	}
	ev := admission.ScopeEvidence{Name: rec.Scope(), ObservedAt: l.clock.Now()}
	r, err := l.auth.Reconcile(ctx, rec.Attempt, ev)
	if errors.Is(err, admission.ErrNotFound) {
		return
	}
	if err != nil {
		l.log.Warn("reconciling a launch whose scope is gone", "attempt", rec.Attempt, "err", err)
		return
	}
	// A consumer's launch made no scope: its owner, not marshald, holds
	// the grant, and abandons it.
	if !r.Phase.Charged() || r.Phase == admission.PhasePrepared || r.Scope != "" || rec.Consumer != "" {
		return
	}
	if _, err := l.auth.AbandonInherited(ctx, l.principal, rec.Attempt, admission.AbandonSpawnFailed); err != nil {
		l.log.Warn("abandoning a launch that made no scope", "attempt", rec.Attempt, "err", err)
	}
}

// goBackground runs fn in a goroutine the Launcher waits for, with Run's
// context; it returns false, running nothing, once Run is stopping.
func (l *Launcher) goBackground(fn func(ctx context.Context)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.bg == nil {
		return false
	}
	l.wg.Go(func() { fn(l.bg) })
	return true
}

// authCtx bounds one request to the authority.
func (l *Launcher) authCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// unknownOutcome reports whether err leaves the authority's answer
// unknown: the request may have been taken and committed, and its answer
// lost, or its commit reported failure although the journal holds it.
func unknownOutcome(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, admission.ErrOutcomeUnknown)
}

func (l *Launcher) observeAdmission(result string) {
	if l.metrics != nil {
		l.metrics.ObserveAdmission(result)
	}
}

func (l *Launcher) observeLaunch(result string, since time.Time) {
	if l.metrics != nil {
		l.metrics.ObserveLaunch(result, l.clock.Since(since))
	}
}

// networkOf returns how executions of w for a caller of uid reach the
// network, and a refusal when that cannot be given.
func (l *Launcher) networkOf(w *v1alpha1.Workspace, uid uint32) (Network, *Refusal) {
	if l.network == nil {
		return Network{}, nil
	}
	n, err := l.network(w, uid)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, isolation.ErrUnavailable):
		detail := detailIsolation
		var ue *isolation.UnavailableError
		if errors.As(err, &ue) {
			detail = ue.Error()
		}
		return Network{}, &Refusal{Code: CodeIsolationUnsupported, Detail: detail, State: StateNotAsked, cause: err}
	case errors.Is(err, ErrNoEgressProxy):
		detail := detailNoEgressProxy
		var ee *EgressUnavailableError
		if errors.As(err, &ee) {
			detail = "egress proxy " + ee.Cause + "; " + ee.Fix
		}
		return Network{}, &Refusal{Code: CodeEgressUnavailable, Detail: detail, State: StateNotAsked, cause: err}
	}
	return Network{}, &Refusal{Code: CodeInternal, Detail: detailNetwork, State: StateNotAsked, cause: err}
}

func (l *Launcher) notify(scope string) {
	if l.onScope != nil {
		l.onScope(scope)
	}
}

func (l *Launcher) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
