package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgroupfs"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/metrics"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// harness is the launch path on real parts: an admission authority over
// a real journal, the cgroupfs backend on a private cgroup subtree, a
// real state database, real metrics, and real child processes as the
// callers. Without root, the cgroup tree is cgrouptest's fake, which
// tracks the callers by their pidfds; as root the kernel's. The clock is
// a fake one shared by the authority and the Launcher, so that deadlines
// and timeouts are stepped, never slept.
type harness struct {
	t     testing.TB
	clock *testclock.FakeClock
	// launcherClock is clock as the Launcher sees it, telling when it
	// arms a timer.
	launcherClock *armingClock
	journal       string
	auth          *admission.Authority
	stopAuth      func()
	capacity      admission.Budget
	caps          cgroup.Capabilities
	backend       cgroup.Backend
	// mount is where the backend's cgroup2 tree is mounted; fake is set
	// when that tree is cgrouptest's.
	mount string
	fake  bool
	db    *state.DB
	// recordDir is where the launch records are kept, and store the
	// store of the Launcher last started, as a daemon's run has one.
	recordDir string
	store     *FileStore
	ws        *workspaces
	metrics   *metrics.Metrics
	// wrap, when set before start, wraps the authority the Launcher
	// talks to, to inject a fault.
	wrap func(Authority) Authority
	// wrapScopes, when set before start, wraps the backend the Launcher
	// makes scopes with, to inject a fault.
	wrapScopes func(Scopes) Scopes
	// network, when set before start, is the Launcher's Network.
	network func(*v1alpha1.Workspace, uint32) (Network, error)
	// consumers, when set, are served by the authority, again after
	// every restart.
	consumers []admission.Consumer
	// self, when set before start, is the process the Launcher registers
	// as, standing for the daemon; the test process by default.
	self *exec.Cmd
	// mode is how launch launches: one of launchModes, "prepared" by
	// default.
	mode  string
	l     *Launcher
	stopL func()
	// changed receives a value whenever the Launcher tells about a scope
	// or a workspace.
	changed chan struct{}
}

// workspaces is the declared workspaces, as the stores would hold them.
type workspaces struct {
	mu      sync.Mutex
	objects map[string]*v1alpha1.Workspace
	ready   map[string]bool
}

func (w *workspaces) Workspace(name string) (*v1alpha1.Workspace, bool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.objects[name]
	return o, w.ready[name], ok
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	backend, mount, fake := newBackend(t)
	caps, err := backend.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t:         t,
		clock:     testclock.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)),
		journal:   filepath.Join(dir, "admission.db"),
		recordDir: filepath.Join(dir, "launches"),
		capacity:  admission.Budget{CPUMilli: 2000, MemoryBytes: 4 << 30, Tasks: 1024},
		caps:      caps,
		backend:   backend,
		mount:     mount,
		fake:      fake,
		db:        db,
		ws:        &workspaces{objects: map[string]*v1alpha1.Workspace{}, ready: map[string]bool{}},
		metrics:   m,
		changed:   make(chan struct{}, 1),
	}
	if err := admission.Create(h.journal); err != nil {
		t.Fatal(err)
	}
	h.openAuthority()
	h.watchTree()
	return h
}

// watchTree pokes changed at every event of the cgroup tree, as the
// agent controller is told of them, until the test ends: a scope that
// empties after its process's exit was told is looked at again.
func (h *harness) watchTree() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.backend.Watch(ctx, func(cgroup.Event) { h.poke() }) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			h.t.Errorf("watching the cgroup tree: %v", err)
		}
	})
}

// poke tells whoever waits on changed to look again.
func (h *harness) poke() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// newBackend is the cgroupfs backend on a private cgroup subtree as root,
// and cgrouptest's fake tree otherwise. It returns the backend, where its
// cgroup2 tree is mounted, and whether it is the fake.
func newBackend(t testing.TB) (cgroup.Backend, string, bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		f := cgrouptest.New(t, cgrouptest.Options{})
		return f, f.Mount(), true
	}
	tree := testutil.NewCgroupTree(t)
	b, err := cgroupfs.New(cgroupfs.Options{Root: tree.Rel, Mounts: tree.Mounts})
	if err != nil {
		t.Fatal(err)
	}
	return b, tree.Mounts.V2, false
}

// openAuthority opens the journal and runs its writer until the test
// ends or stopAuth is called.
func (h *harness) openAuthority() {
	h.t.Helper()
	a, err := admission.Open(h.journal, admission.Options{
		Clock:    h.clock,
		Pressure: pressure.Fixed{Level: pressure.Normal, Reason: pressure.ReasonNone},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	cpu, mem, tasks := int64(h.capacity.CPUMilli), int64(h.capacity.MemoryBytes), int64(h.capacity.Tasks)
	if err := a.SetHost(&v1alpha1.Capacity{CPUMilli: &cpu, MemoryBytes: &mem, Tasks: &tasks}, 5*time.Second); err != nil {
		h.t.Fatal(err)
	}
	if err := a.SetPlan(h.caps); err != nil {
		h.t.Fatal(err)
	}
	if h.consumers != nil {
		if err := a.SetConsumers(h.consumers, ""); err != nil {
			h.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	h.auth = a
	h.stopAuth = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("authority: %v", err)
			}
			a.Close()
		})
	}
	h.t.Cleanup(h.stopAuth)
}

// start runs a Launcher until the test ends or stopL is called, and waits
// until it is ready.
func (h *harness) start() *Launcher {
	h.t.Helper()
	var auth Authority = h.auth
	if h.wrap != nil {
		auth = h.wrap(auth)
	}
	var scopes Scopes = h.backend
	if h.wrapScopes != nil {
		scopes = h.wrapScopes(scopes)
	}
	poke := func(string) { h.poke() }
	if h.store != nil {
		h.store.Close()
	}
	h.store = NewFileStore(h.recordDir, h.db)
	l, err := New(Options{
		Authority: auth, Scopes: scopes, Store: h.store, Workspaces: h.ws,
		CgroupMount: h.mount, Metrics: h.metrics, Clock: h.armingClock(),
		OnScope: poke, OnWorkspace: poke, Self: h.selfPeer(), Network: h.network,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	h.l = l
	h.stopL = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("launcher: %v", err)
			}
		})
	}
	h.t.Cleanup(h.stopL)
	select {
	case <-l.Ready():
	case err := <-done:
		h.t.Fatalf("launcher stopped before ready: %v", err)
	case <-time.After(testutil.Deadline):
		h.t.Fatal("launcher not ready")
	}
	return l
}

func (h *harness) selfPeer() admission.Peer {
	if h.self == nil {
		return admission.Peer{}
	}
	return admission.Peer{UID: uint32(os.Getuid()), PID: h.self.Process.Pid}
}

// daemonProcess makes the Launcher register as a process of its own, as
// the daemon it stands for does, so that a restart can end it.
func (h *harness) daemonProcess() {
	h.t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	h.self = cmd
}

// restart stops the Launcher and the authority as a crash leaves them
// (nothing but the journal and the state database survive; the process
// the Launcher registered as is gone) and starts both again, the new
// Launcher registered as the test process.
func (h *harness) restart() *Launcher {
	h.t.Helper()
	h.stopL()
	h.stopAuth()
	if h.self != nil {
		h.self.Process.Kill()
		h.self.Wait()
		h.self = nil
	}
	h.openAuthority()
	return h.start()
}

// workspace declares a Ready workspace of profile coder with
// participation p and max_live slots.
func (h *harness) workspace(name string, p v1alpha1.Participation, maxLive int64) *v1alpha1.Workspace {
	h.t.Helper()
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata.Name = name
	w.Spec.Root = h.t.TempDir()
	w.Spec.Profile = "coder"
	w.Spec.Processes.MaxLive = &maxLive
	w.Spec.Resources = &v1alpha1.ResourcesSpec{Participation: p}
	w.Spec.Exec.Env = map[string]string{"TEAM": "web"}
	w.Default()
	if errs := w.Validate(); len(errs) > 0 {
		h.t.Fatal(errs)
	}
	h.ws.mu.Lock()
	h.ws.objects[name], h.ws.ready[name] = w, true
	h.ws.mu.Unlock()
	return w
}

// caller is a real process that a launch pins and moves into its scope.
type caller struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (h *harness) caller() (*caller, *Process) {
	h.t.Helper()
	c := &caller{cmd: exec.Command("sleep", "600"), done: make(chan struct{})}
	if err := c.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	h.t.Cleanup(func() { c.cmd.Process.Kill(); <-c.done })
	p, err := Pin(c.cmd.Process.Pid, uint32(os.Getuid()), 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return c, p
}

// exit kills the caller and waits until it is reaped.
func (c *caller) exit(t *testing.T) {
	t.Helper()
	c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(testutil.Deadline):
		t.Fatal("caller did not exit")
	}
}

func (h *harness) request(ws string, argv ...string) Request {
	if len(argv) == 0 {
		argv = []string{"true"}
	}
	return Request{Workspace: ws, Argv: argv, Env: []string{"PATH=/usr/bin:/bin", "HOME=/root"}}
}

// launchModes are the ways to launch: "prepared", Prepare and then
// PreparedExecution.Launch, and "at_once", Launcher.Launch, as marshalctl
// run does.
var launchModes = []string{"prepared", "at_once"}

// run launches req for caller p in h's mode.
func (h *harness) run(req Request, p *Process) (Plan, error) {
	if h.mode == "at_once" {
		return h.l.Launch(h.t.Context(), req, p)
	}
	pe, err := h.l.Prepare(h.t.Context(), req, p)
	if err != nil {
		return Plan{}, err
	}
	return pe.Launch(h.t.Context(), req)
}

// launch launches req for a new caller, in h's mode, and fails the test
// unless it starts.
func (h *harness) launch(req Request) (*caller, Plan) {
	h.t.Helper()
	c, p := h.caller()
	plan, err := h.run(req, p)
	if err != nil {
		h.t.Fatalf("launch (%s): %v", h.mode, err)
	}
	return c, plan
}

// eachMode runs test once per launch mode, each with a harness of its
// own.
func eachMode(t *testing.T, test func(t *testing.T, h *harness)) {
	for _, mode := range launchModes {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t)
			h.mode = mode
			test(t, h)
		})
	}
}

// refusal asserts err is a refusal with code and state.
func refusal(t *testing.T, err error, code Code, state State) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal %s", err, code)
	}
	if r.Code != code || r.State != state {
		t.Fatalf("refusal = %s state %s (%v), want %s state %s", r.Code, r.State, r, code, state)
	}
	return r
}

// scopes lists the scope names in the tree.
func (h *harness) scopes() []string {
	h.t.Helper()
	list, err := h.backend.ListScopes(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, sc := range list {
		names = append(names, sc.Name)
	}
	return names
}

// scopeOf names the scope whose cgroup.procs lists pid, "" when none
// does: the kernel's own account on real cgroups, the fake's on the fake.
func (h *harness) scopeOf(pid int) string {
	h.t.Helper()
	list, err := h.backend.ListScopes(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, sc := range list {
		procs, err := cgroup.ReadProcs(filepath.Join(h.mount, sc.Path))
		if err != nil && !errors.Is(err, cgroup.ErrNotFound) {
			h.t.Fatal(err)
		}
		if slices.Contains(procs, pid) {
			return sc.Name
		}
	}
	return ""
}

// lookup is the attempt as the authority holds it.
func (h *harness) lookup(id string) admission.Record {
	h.t.Helper()
	r, err := h.auth.Lookup(h.t.Context(), h.l.principal, id)
	if err != nil {
		h.t.Fatalf("Lookup(%s): %v", id, err)
	}
	return r
}

// records lists the launch records.
func (h *harness) records() []Record {
	h.t.Helper()
	recs, err := h.store.List(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	return recs
}

// settle waits until the launch of plan is over, its attempt reconciled,
// then removes its scope and forgets it, as the agent controller does.
func (h *harness) settle(plan Plan) {
	h.t.Helper()
	sc := cgroup.Scope{Name: plan.Scope, ID: plan.ID}
	id, _ := scope.ParseScopeName(plan.Scope)
	sc.Profile = id.Profile
	h.l.mu.Lock()
	if st := h.l.launches[plan.ID]; st != nil {
		sc.Path = st.path
	}
	h.l.mu.Unlock()
	var err error
	testutil.Eventually(h.t, h.changed, func() bool {
		var over bool
		over, _, err = h.l.Settle(h.t.Context(), sc, time.Time{})
		return over || err != nil
	}, "the launch to be over")
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.backend.RemoveScope(h.t.Context(), sc); err != nil {
		h.t.Fatal(err)
	}
	if err := h.l.Forget(h.t.Context(), plan.ID); err != nil {
		h.t.Fatal(err)
	}
}

// armingClock is a fake clock that tells each arming of a timer made of
// it, and for when: the Launcher arms its timeout timer on its own
// goroutine, after a launch returns, for a delay it took from the clock a
// moment before; a test that steps the clock in that moment would have it
// armed late. Tests wait for the arming before they step.
type armingClock struct {
	*testclock.FakeClock
	armed chan struct{}
	mu    sync.Mutex
	at    map[time.Time]bool
}

// armingClock returns the harness's clock as a new Launcher is given
// it: what an earlier one armed is forgotten.
func (h *harness) armingClock() *armingClock {
	h.launcherClock = &armingClock{FakeClock: h.clock, armed: make(chan struct{}, 1), at: map[time.Time]bool{}}
	return h.launcherClock
}

func (c *armingClock) NewTimer(d time.Duration) clock.Timer {
	t := &armingTimer{Timer: c.FakeClock.NewTimer(d), c: c}
	c.note(d)
	return t
}

// note records an arming for d from now.
func (c *armingClock) note(d time.Duration) {
	c.mu.Lock()
	c.at[c.Now().Add(d)] = true
	c.mu.Unlock()
	select {
	case c.armed <- struct{}{}:
	default:
	}
}

// waitArmed waits until a timer of the clock was armed to fire at at.
func (c *armingClock) waitArmed(t *testing.T, at time.Time) {
	t.Helper()
	testutil.Eventually(t, c.armed, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.at[at]
	}, "a timer armed for "+at.Format(time.RFC3339))
}

type armingTimer struct {
	clock.Timer
	c *armingClock
}

func (t *armingTimer) Reset(d time.Duration) bool {
	ok := t.Timer.Reset(d)
	t.c.note(d)
	return ok
}
