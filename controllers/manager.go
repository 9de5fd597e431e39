package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/pathwatch"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/reconcile"
)

// Defaults of Options.
const (
	// DefaultInterval is how often, when nothing else happens, slices are
	// checked for drift, workspace roots and the host re-examined, and the
	// scope tree relisted. Nothing else wakes an idle daemon.
	DefaultInterval = 60 * time.Second
	// DefaultWorkers is how many keys each controller reconciles at once.
	DefaultWorkers = 2
	// DefaultEmptyScopeGrace is how long a scope that was never seen
	// populated may stay empty before it is removed: the time a launch
	// takes between creating its scope and moving its process in, with a
	// wide margin.
	DefaultEmptyScopeGrace = 10 * time.Second
)

// Options configure the controllers. The zero value is usable.
type Options struct {
	// Workers is how many keys each controller reconciles at once.
	// Default DefaultWorkers.
	Workers int
	// Clock measures requeues, backoff, lastTransitionTime, agents' since
	// and the grace of empty scopes. Default the real clock.
	Clock clock.WithTicker
	// Interval is the relist and requeue interval. Default
	// DefaultInterval.
	Interval time.Duration
	// MetricsProvider, when set, receives the work queues' metrics.
	MetricsProvider workqueue.MetricsProvider
	// EmptyScopeGrace is how long a never-populated scope may stay empty
	// before it is removed. Default DefaultEmptyScopeGrace.
	EmptyScopeGrace time.Duration
	// Launches, when set, is the launch path's record of the scopes it
	// made: the agent controller settles a launch before removing its
	// scope, and a scope counts for its workspace. Without it no scope is
	// known to belong to a workspace.
	Launches Launches
	// Egress, when set, is marshald's egress proxy: the Host reports it
	// (condition EgressProxy), and a Profile that declares egress is not
	// Ready while the proxy cannot serve its launches.
	Egress EgressProxy
	// Logger receives the controllers' records. Default slog.Default().
	Logger *slog.Logger
}

// Backend is the part of the cgroup backend the controllers use: the
// host's probe, the profiles' slices, and the scopes they observe, kill
// and remove once empty. Every cgroup.Backend is one.
type Backend interface {
	Name() string
	Probe(ctx context.Context) (cgroup.Capabilities, error)
	EnsureSlice(ctx context.Context, profile string, limits cgroup.Limits) (cgroup.Applied, error)
	RemoveSlice(ctx context.Context, profile string) error
	ListScopes(ctx context.Context) ([]cgroup.Scope, error)
	Watch(ctx context.Context, fn func(cgroup.Event)) error
	Kill(ctx context.Context, s cgroup.Scope) error
	RemoveScope(ctx context.Context, s cgroup.Scope) error
}

var _ Backend = cgroup.Backend(nil)

// env is what every controller shares.
type env struct {
	s        *Stores
	backend  Backend
	rec      recorder
	clock    clock.WithTicker
	interval time.Duration
	log      *slog.Logger
	// profiles remembers deleted profiles' specs for the profile and agent
	// controllers.
	profiles *profileMemory
	// workspacesByProfile maps a Profile key to the Workspaces naming it.
	workspacesByProfile *reconcile.Index
	// scopesByProfile maps a Profile key to the agent keys of its scopes.
	scopesByProfile *reconcile.Index
	// scopesByWorkspace maps a Workspace key to the agent keys of the
	// scopes launched in it.
	scopesByWorkspace *reconcile.Index
	// roots watches workspace roots: a root created or removed enqueues
	// its workspaces, so readiness needs no polling.
	roots *pathwatch.Watcher
	// launches is Options.Launches, or nil.
	launches Launches
	// egress is Options.Egress, or nil.
	egress EgressProxy

	// emptiedMu guards emptied.
	emptiedMu sync.Mutex
	// emptied holds, per scope name, when the scope was last seen empty,
	// until it is seen populated again or its agent is gone: the evidence
	// of a scope that removes itself once empty (systemd's).
	emptied map[string]time.Time
}

// noteScope notes when the scope of key was seen empty, or forgets it when
// seen populated; a scope gone keeps its note for the agent controller.
func (e *env) noteScope(k reconcile.Key, sc cgroup.Scope, ok bool) {
	if !ok {
		return
	}
	e.emptiedMu.Lock()
	defer e.emptiedMu.Unlock()
	if sc.Populated {
		delete(e.emptied, k.Name)
	} else {
		e.emptied[k.Name] = e.now()
	}
}

// emptiedAt returns when scope name was seen empty, zero when not.
func (e *env) emptiedAt(name string) time.Time {
	e.emptiedMu.Lock()
	defer e.emptiedMu.Unlock()
	return e.emptied[name]
}

func (e *env) forgetEmptied(name string) {
	e.emptiedMu.Lock()
	defer e.emptiedMu.Unlock()
	delete(e.emptied, name)
}

// now returns the clock's time without its monotonic reading, as stored
// in statuses.
func (e *env) now() time.Time { return e.clock.Now().Round(0) }

// Manager runs the controllers and the tree observer.
type Manager struct {
	env         *env
	profiles    *reconcile.Controller
	workspaces  *reconcile.Controller
	agents      *reconcile.Controller
	hosts       *reconcile.Controller
	consumers   *reconcile.Controller
	agentR      *agentReconciler
	observer    *observer
	unsubscribe []func()

	// synced is closed once Start has listed the scopes and marked those
	// empty at start-up for collection.
	synced chan struct{}

	// mu guards started.
	mu      sync.Mutex
	started bool
}

// Synced is closed once Start has taken its first listing of the scopes
// and enqueued every object: a scope created after that is never taken
// for one that was already empty when the controllers started.
func (m *Manager) Synced() <-chan struct{} { return m.synced }

// Setup creates the controllers and wires the stores' handlers to
// them, so that a change enqueues exactly the keys it affects:
//
//   - a Profile change: that profile, the workspaces naming it (an index)
//     and the agents of its scopes (for their Orphaned condition);
//   - a Workspace change: that workspace;
//   - a Profile's status change: the workspaces naming it (their
//     readiness follows the profile's slice);
//   - a Host change: that host and the local host key (the status key
//     moves between them), and every Consumer;
//   - a Consumer change: every Consumer (each is judged against the
//     others);
//   - a Decls change: the object it is about;
//   - a Scopes change: its agent, its profile and its workspace.
//
// Run them with Manager.Start. Setup returns ErrInvalidSetup when a store,
// the backend or the recorder is missing or an option is negative.
func Setup(s *Stores, backend Backend, rec *events.Recorder, opts Options) (*Manager, error) {
	switch {
	case s == nil || s.Desired == nil || s.Decls == nil || s.Profiles == nil || s.Workspaces == nil ||
		s.Hosts == nil || s.Consumers == nil || s.Scopes == nil || s.Agents == nil:
		return nil, fmt.Errorf("a store is missing (use NewStores): %w", ErrInvalidSetup)
	case backend == nil:
		return nil, fmt.Errorf("no cgroup backend: %w", ErrInvalidSetup)
	case rec == nil:
		return nil, fmt.Errorf("no event recorder: %w", ErrInvalidSetup)
	case opts.Workers < 0 || opts.Interval < 0 || opts.EmptyScopeGrace < 0:
		return nil, fmt.Errorf("workers, interval and grace must not be negative: %w", ErrInvalidSetup)
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.EmptyScopeGrace == 0 {
		opts.EmptyScopeGrace = DefaultEmptyScopeGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &env{
		s:        s,
		backend:  backend,
		rec:      rec,
		clock:    opts.Clock,
		interval: opts.Interval,
		log:      opts.Logger,
		profiles: newProfileMemory(),
		workspacesByProfile: s.Desired.AddIndex(func(o v1alpha1.Object) []reconcile.Key {
			if w, ok := o.(*v1alpha1.Workspace); ok {
				return []reconcile.Key{ProfileKey(w.Spec.Profile)}
			}
			return nil
		}),
		scopesByProfile: s.Scopes.AddIndex(func(_ reconcile.Key, sc cgroup.Scope) []reconcile.Key {
			return []reconcile.Key{ProfileKey(sc.Profile)}
		}),
		scopesByWorkspace: reconcile.NewIndex(),
		launches:          opts.Launches,
		egress:            opts.Egress,
		emptied:           map[string]time.Time{},
	}
	m := &Manager{env: e, agentR: newAgentReconciler(e, opts.EmptyScopeGrace), observer: newObserver(e), synced: make(chan struct{})}
	roots, err := pathwatch.New(func(owner string) {
		if k, err := reconcile.ParseKey(owner); err == nil {
			m.workspaces.Enqueue(k)
		}
	}, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("watching workspace roots: %w", err)
	}
	e.roots = roots
	copts := reconcile.Options{Workers: opts.Workers, Clock: opts.Clock, Logger: opts.Logger, MetricsProvider: opts.MetricsProvider}
	if m.profiles, err = reconcile.NewController("profile", newProfileReconciler(e), copts); err != nil {
		return nil, err
	}
	if m.workspaces, err = reconcile.NewController("workspace", &workspaceReconciler{e}, copts); err != nil {
		return nil, err
	}
	if m.agents, err = reconcile.NewController("agent", m.agentR, copts); err != nil {
		return nil, err
	}
	if m.hosts, err = reconcile.NewController("host", &hostReconciler{e}, copts); err != nil {
		return nil, err
	}
	if m.consumers, err = reconcile.NewController("consumer", &consumerReconciler{e}, copts); err != nil {
		return nil, err
	}
	m.wire()
	return m, nil
}

// wire registers the store handlers.
func (m *Manager) wire() {
	s, e := m.env.s, m.env
	on := func(remove func()) { m.unsubscribe = append(m.unsubscribe, remove) }

	on(s.Desired.OnChange(reconcile.ForKind(v1alpha1.KindProfile, reconcile.EnqueueKey(m.profiles))))
	on(s.Desired.OnChange(reconcile.ForKind(v1alpha1.KindProfile,
		reconcile.EnqueueMapped(m.workspaces, e.workspacesByProfile.Referrers))))
	on(s.Desired.OnChange(reconcile.ForKind(v1alpha1.KindProfile,
		reconcile.EnqueueMapped(m.agents, e.scopesByProfile.Referrers))))
	on(s.Desired.OnChange(reconcile.ForKind(v1alpha1.KindWorkspace, reconcile.EnqueueKey(m.workspaces))))
	// A workspace is not Ready while its profile's slice cannot be made.
	on(s.Profiles.OnChange(reconcile.EnqueueMapped(m.workspaces, e.workspacesByProfile.Referrers)))
	on(s.Desired.OnChange(reconcile.ForKind(v1alpha1.KindHost, m.enqueueHost)))
	// A Consumer is judged against every other Consumer and the Host.
	on(s.Desired.OnChange(func(k reconcile.Key) {
		if k.Kind == v1alpha1.KindConsumer || k.Kind == v1alpha1.KindHost {
			m.enqueueConsumers(k)
		}
	}))

	on(s.Decls.OnChange(func(k reconcile.Key) {
		switch k.Kind {
		case v1alpha1.KindProfile:
			m.profiles.Enqueue(k)
		case v1alpha1.KindWorkspace:
			m.workspaces.Enqueue(k)
		case v1alpha1.KindHost:
			m.enqueueHost(k)
		case v1alpha1.KindConsumer:
			m.consumers.Enqueue(k)
		}
	}))

	on(s.Scopes.OnChange(func(k reconcile.Key) {
		m.agents.Enqueue(k)
		if id, ok := scope.ParseScopeName(k.Name); ok {
			m.profiles.Enqueue(ProfileKey(id.Profile))
		}
		// The workspace a scope counts for: where it was before the
		// change, and where it is now.
		was := e.scopesByWorkspace.Targets(k)
		var now []reconcile.Key
		sc, ok := s.Scopes.Get(k)
		e.noteScope(k, sc, ok)
		if ok {
			if w, ok := e.workspaceOf(sc); ok {
				now = []reconcile.Key{WorkspaceKey(w)}
			}
		}
		e.scopesByWorkspace.Set(k, now...)
		for _, w := range append(was, now...) {
			m.workspaces.Enqueue(w)
		}
	}))
}

// EnqueueAgent asks the agent controller to look at the agent of scope
// unit name scope: the launch path calls it when something about a
// launch changed that the cgroup tree does not show (its process exited,
// its launch finished).
func (m *Manager) EnqueueAgent(scope string) { m.agents.Enqueue(AgentKey(scope)) }

// EnqueueWorkspace asks the workspace controller to look at workspace
// name: its slots changed.
func (m *Manager) EnqueueWorkspace(name string) { m.workspaces.Enqueue(WorkspaceKey(name)) }

// Close releases what Setup opened (the watch of workspace roots), for a
// manager that is never started, or whose Start has returned: Start
// releases it too. Close may be called more than once.
func (m *Manager) Close() error { return m.env.roots.Close() }

// Controllers returns the controllers, for their names and Stats.
func (m *Manager) Controllers() []*reconcile.Controller {
	return []*reconcile.Controller{m.profiles, m.workspaces, m.agents, m.hosts, m.consumers}
}

// enqueueConsumers enqueues every declared Consumer, and k when it is a
// Consumer's key (one just deleted, whose status goes).
func (m *Manager) enqueueConsumers(k reconcile.Key) {
	if k.Kind == v1alpha1.KindConsumer {
		m.consumers.Enqueue(k)
	}
	for _, c := range m.env.s.Desired.Keys(v1alpha1.KindConsumer) {
		m.consumers.Enqueue(c)
	}
}

// enqueueHost enqueues the key of a changed Host and the local host key:
// the status lives under one or the other.
func (m *Manager) enqueueHost(k reconcile.Key) {
	m.hosts.Enqueue(k)
	m.hosts.Enqueue(HostKey(LocalHost))
}

// Start lists the live scopes into Stores.Scopes, marks the empty ones
// for removal (start-up garbage collection), enqueues every object and
// scope once, then runs the controllers and the tree observer until ctx
// ends, and returns once all of them stopped. Stopping by cancellation
// returns nil. It returns an error when the first listing fails, and
// ErrAlreadyStarted when called twice.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrAlreadyStarted
	}
	m.started = true
	m.mu.Unlock()
	defer func() {
		for _, remove := range m.unsubscribe {
			remove()
		}
	}()

	if err := m.observer.sync(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listing scopes at start: %w", err)
	}
	m.agentR.collectAtStart(m.env.s.Scopes.List())
	m.enqueueAll()
	close(m.synced)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 6)
	)
	for _, c := range m.Controllers() {
		wg.Go(func() {
			if err := c.Start(ctx); err != nil {
				errs <- fmt.Errorf("%s controller: %w", c.Name(), err)
				cancel()
			}
		})
	}
	wg.Go(func() { m.observer.run(ctx) })
	wg.Go(func() {
		if err := m.env.roots.Start(ctx); err != nil {
			errs <- fmt.Errorf("root watch: %w", err)
			cancel()
		}
	})
	<-ctx.Done()
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// enqueueAll enqueues every declared object, every live scope, the
// profiles of those scopes (declared or not) and every host key.
func (m *Manager) enqueueAll() {
	s := m.env.s
	for _, k := range s.Desired.Keys(v1alpha1.KindProfile) {
		m.profiles.Enqueue(k)
	}
	for _, e := range s.Scopes.List() {
		m.agents.Enqueue(e.Key)
		m.profiles.Enqueue(ProfileKey(e.Value.Profile))
	}
	for _, k := range s.Desired.Keys(v1alpha1.KindWorkspace) {
		m.workspaces.Enqueue(k)
	}
	m.hosts.Enqueue(HostKey(LocalHost))
	for _, k := range s.Desired.Keys(v1alpha1.KindHost) {
		m.hosts.Enqueue(k)
	}
	for _, k := range s.Desired.Keys(v1alpha1.KindConsumer) {
		m.consumers.Enqueue(k)
	}
	for _, k := range s.Hosts.Keys() {
		m.hosts.Enqueue(k)
	}
}
