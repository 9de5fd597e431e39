package controllers_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

// harness is a backend on a cgroup tree (the host's or the fake one), the
// stores, a real event recorder and, once started, the controllers.
type harness struct {
	t       testing.TB
	k       controllers.Kernel
	backend cgroup.Backend // k.Backend, or a wrapper of it
	s       *controllers.Stores
	rec     *events.Recorder
	// wake receives a value after any store changed.
	wake chan struct{}
	opts controllers.Options
}

type harnessOptions struct {
	// wrap, when set, wraps the real backend, to inject a fault.
	wrap     func(cgroup.Backend) cgroup.Backend
	interval time.Duration
	clock    clock.WithTicker
	logger   *slog.Logger
}

// newHarness builds a harness on k.
func newHarness(t testing.TB, k controllers.Kernel, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, k: k, backend: k.Backend, s: controllers.NewStores(), wake: make(chan struct{}, 1)}
	if o.wrap != nil {
		h.backend = o.wrap(k.Backend)
	}
	eo := events.Options{}
	if o.clock != nil {
		eo.Clock = o.clock
	}
	var err error
	if h.rec, err = events.New(eo); err != nil {
		t.Fatal(err)
	}
	poke := func(reconcile.Key) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	h.s.Desired.OnChange(poke)
	h.s.Decls.OnChange(poke)
	h.s.Profiles.OnChange(poke)
	h.s.Workspaces.OnChange(poke)
	h.s.Hosts.OnChange(poke)
	h.s.Consumers.OnChange(poke)
	h.s.Scopes.OnChange(poke)
	h.s.Agents.OnChange(poke)
	h.opts = controllers.Options{Interval: o.interval, Clock: o.clock, Logger: o.logger}
	if h.opts.Logger == nil {
		h.opts.Logger = testLogger(t)
	}
	return h
}

// testLogger logs through t, so that a failing test shows the
// controllers' records.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// start runs the controllers until the test ends, or until stop is
// called. They stop before the cgroup tree is removed (cleanups run last
// first).
func (h *harness) start() (stop func()) {
	h.t.Helper()
	m, err := controllers.Setup(h.s, h.backend, h.rec, h.opts)
	if err != nil {
		h.t.Fatalf("Setup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					h.t.Errorf("Manager.Start = %v, want nil", err)
				}
			case <-time.After(testutil.Deadline):
				h.t.Errorf("Manager.Start did not return %v after cancel", testutil.Deadline)
			}
		})
	}
	h.t.Cleanup(stop)
	// A scope a test makes before the first listing would count as
	// empty at start-up, and be collected before its process is in.
	select {
	case <-m.Synced():
	case err := <-done:
		done <- err // for stop
		h.t.Fatalf("Manager.Start = %v before its first listing", err)
	case <-time.After(testutil.Deadline):
		h.t.Fatalf("Manager.Start did not list the scopes in %v", testutil.Deadline)
	}
	return stop
}

// waitFor waits until cond holds, checking after every store change.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testutil.Eventually(h.t, h.wake, cond, what)
}

// events returns the events recorded about key, oldest first.
func (h *harness) events(key reconcile.Key) []v1alpha1.Event {
	evs, _ := h.rec.List(key, 0)
	return evs
}

// slicePath returns the cgroup2 path of profile's slice.
func (h *harness) slicePath(profile string) string {
	return h.k.V2(scope.RootSlice, scope.SliceName(profile))
}

// limitFile returns the file that holds r's limit of profile's slice
// under method m.
func (h *harness) limitFile(profile string, r cgroup.Resource, m cgroup.Method) string {
	base := h.k.Mounts.V2
	if m == cgroup.MethodCgroupV1 {
		base = h.k.Mounts.V1[cgroup.Controller(r)]
	}
	return filepath.Join(base, h.k.Root, scope.RootSlice, scope.SliceName(profile), cgroup.LimitFile(r, m))
}

// requireKernel skips the test unless the backend enforces every one of
// resources at kernel level here, and returns the probe.
func (h *harness) requireKernel(resources ...cgroup.Resource) cgroup.Capabilities {
	h.t.Helper()
	caps, err := h.k.Backend.Probe(h.t.Context())
	if err != nil {
		h.t.Fatalf("Probe: %v", err)
	}
	for _, r := range resources {
		if caps[r].Level != v1alpha1.LevelKernel {
			h.t.Skipf("needs %s limits enforced by the kernel; this host gives %s", r, caps[r].Level)
		}
	}
	return caps
}

// inScope starts a child that runs until killed and puts it in a new
// scope of profile, through the backend, and returns both.
func (h *harness) inScope(profile string) (*testutil.Child, cgroup.Scope) {
	h.t.Helper()
	c := testutil.StartChild(h.t, exec.Command("sleep", "600"))
	sc, _, err := h.k.Backend.CreateScope(h.t.Context(), profile, scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		h.t.Fatalf("CreateScope: %v", err)
	}
	return c, sc
}

// scopeDir returns the cgroup2 directory of sc.
func (h *harness) scopeDir(sc cgroup.Scope) string {
	return filepath.Join(h.k.Mounts.V2, sc.Path)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// declare sets obj, defaulted, in the desired store.
func (h *harness) declare(obj v1alpha1.Object) {
	h.t.Helper()
	obj.Default()
	if errs := obj.Validate(); len(errs) > 0 {
		h.t.Fatalf("declaring %s: %v", reconcile.KeyOf(obj), errs)
	}
	if _, err := h.s.Desired.Set(obj); err != nil {
		h.t.Fatalf("declaring %s: %v", reconcile.KeyOf(obj), err)
	}
}

func profile(name string, orphans v1alpha1.OrphanPolicy, limits *v1alpha1.Limits) *v1alpha1.Profile {
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = name
	p.Spec.Orphans = orphans
	p.Spec.Limits = limits
	return p
}

func workspace(name, root, profile string) *v1alpha1.Workspace {
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata.Name = name
	w.Spec.Root = root
	w.Spec.Profile = profile
	return w
}

func host(name string, c *v1alpha1.Capacity) *v1alpha1.Host {
	h := v1alpha1.New(v1alpha1.KindHost).(*v1alpha1.Host)
	h.Metadata.Name = name
	h.Spec.Capacity = c
	return h
}

func ptr[T any](v T) *T { return &v }

// cond returns the condition of typ in conds, or the zero condition.
func cond(conds []v1alpha1.Condition, typ string) v1alpha1.Condition {
	if c := controllers.FindCondition(conds, typ); c != nil {
		return *c
	}
	return v1alpha1.Condition{}
}

// reasons lists "Type:Reason" of evs.
func reasons(evs []v1alpha1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type)+":"+e.Reason)
	}
	return out
}

// occurrences counts the events in evs, repeats included.
func occurrences(evs []v1alpha1.Event) int64 {
	var n int64
	for _, e := range evs {
		n += e.Count
	}
	return n
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }
