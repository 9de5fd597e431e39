package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// The slice is created with the profile's limits, read back, and the
// status says how each is held; a spec change moves observedGeneration
// and the limits, and no event is recorded: the conditions appeared good
// and never changed.
func TestProfileSliceCarriesItsLimits(t *testing.T) {
	controllers.OnEachKernel(t, testProfileSliceCarriesItsLimits)
}

func testProfileSliceCarriesItsLimits(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{})
	caps := h.requireKernel(cgroup.CPU, cgroup.Memory, cgroup.PIDs)
	h.declare(profile("coder", "", &v1alpha1.Limits{
		CPUMilli: ptr[int64](500), MemoryBytes: ptr[int64](64 << 20), Tasks: ptr[int64](64),
	}))
	h.start()
	key := controllers.ProfileKey("coder")

	var st v1alpha1.ProfileStatus
	h.waitFor("profile coder Ready", func() bool {
		st, _ = h.s.Profiles.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	if st.Slice != "marshal-coder.slice" {
		t.Errorf("status.slice = %q, want marshal-coder.slice", st.Slice)
	}
	if !exists(h.slicePath("coder")) {
		t.Errorf("slice %s does not exist", h.slicePath("coder"))
	}
	want := map[string]int64{"cpu": 500, "memory": 64 << 20, "pids": 64}
	if len(st.Limits) != 3 {
		t.Fatalf("status.limits = %+v, want cpu, memory and pids", st.Limits)
	}
	for _, l := range st.Limits {
		r := cgroup.Resource(l.Resource)
		c := caps[r]
		if l.Requested != want[l.Resource] || l.Applied != want[l.Resource] {
			t.Errorf("%s: requested %d applied %d, want both %d", r, l.Requested, l.Applied, want[l.Resource])
		}
		if l.Enforcement.Level != v1alpha1.LevelKernel || l.Enforcement.Method != string(c.Method) ||
			l.Enforcement.Controller != c.Controller {
			t.Errorf("%s enforcement = %+v, want kernel through %s (%s)", r, l.Enforcement, c.Method, c.Controller)
		}
		if len(h.k.Mounts.V1) > 0 && h.k.Mounts.V1[string(r)] != "" && l.Enforcement.Method != string(cgroup.MethodCgroupV1) {
			t.Errorf("%s method = %s on a hybrid host, want cgroup_v1", r, l.Enforcement.Method)
		}
		// The kernel holds it: read the file back independently.
		got, err := cgroup.ReadLimit(strings.TrimSuffix(h.limitFile("coder", r, c.Method), "/"+c.Controller), r, c.Method)
		if err != nil || got != want[l.Resource] {
			t.Errorf("%s limit file reads %d, %v; want %d", r, got, err, want[l.Resource])
		}
	}
	if c := cond(st.Conditions, v1alpha1.ConditionEnforced); c.Status != v1alpha1.ConditionTrue || c.Reason != controllers.ReasonLimitsEnforced {
		t.Errorf("Enforced = %+v, want True %s", c, controllers.ReasonLimitsEnforced)
	}
	if st.ObservedGeneration != 1 || cond(st.Conditions, v1alpha1.ConditionReady).ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d (Ready's %d), want 1", st.ObservedGeneration,
			cond(st.Conditions, v1alpha1.ConditionReady).ObservedGeneration)
	}
	// Conditions that appear good are the expected state, not news.
	if got := reasons(h.events(key)); len(got) != 0 {
		t.Errorf("events of a profile that came up fine = %v, want none", got)
	}

	h.declare(profile("coder", "", &v1alpha1.Limits{
		CPUMilli: ptr[int64](500), MemoryBytes: ptr[int64](64 << 20), Tasks: ptr[int64](128),
	}))
	h.waitFor("generation 2 observed", func() bool {
		st, _ = h.s.Profiles.Get(key)
		return st.ObservedGeneration == 2
	})
	if got := st.Limits[2]; got.Resource != "pids" || got.Applied != 128 {
		t.Errorf("pids after the change = %+v, want applied 128", got)
	}
	if c := cond(st.Conditions, v1alpha1.ConditionReady); c.ObservedGeneration != 2 {
		t.Errorf("Ready observedGeneration = %d, want 2", c.ObservedGeneration)
	}
	if got := reasons(h.events(key)); len(got) != 0 {
		t.Errorf("events after a change that moved no condition = %v, want none", got)
	}
}

// A limit changed behind marshal's back is put back by the periodic
// reconcile, without any event telling the controller.
func TestProfileDriftIsCorrected(t *testing.T) {
	controllers.OnEachKernel(t, testProfileDriftIsCorrected)
}

func testProfileDriftIsCorrected(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{interval: 20 * time.Millisecond})
	caps := h.requireKernel(cgroup.PIDs)
	h.declare(profile("coder", "", &v1alpha1.Limits{Tasks: ptr[int64](64)}))
	h.start()
	h.waitFor("profile coder Ready", func() bool {
		st, _ := h.s.Profiles.Get(controllers.ProfileKey("coder"))
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})

	file := h.limitFile("coder", cgroup.PIDs, caps[cgroup.PIDs].Method)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("1000"), 0); err != nil {
		t.Fatalf("writing drift: %v", err)
	}
	read := func() string {
		b, _ := os.ReadFile(file)
		return strings.TrimSpace(string(b))
	}
	testutil.Eventually(t, w.Events, func() bool { return read() == "64" }, file+" back to 64")
}

// errInjected is the fault the faulty backend injects.
var errInjected = errors.New("injected fault")

// failingEnsure is the real backend, except that EnsureSlice fails its
// first fail calls.
type failingEnsure struct {
	cgroup.Backend
	mu    sync.Mutex
	fail  int
	calls int
}

func (f *failingEnsure) EnsureSlice(ctx context.Context, profile string, l cgroup.Limits) (cgroup.Applied, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.fail
	f.mu.Unlock()
	if fail {
		return cgroup.Applied{}, fmt.Errorf("call %d: %w", f.calls, errInjected)
	}
	return f.Backend.EnsureSlice(ctx, profile, l)
}

func (f *failingEnsure) ensureCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// A failing EnsureSlice sets Ready False with the error, retries with
// backoff, and records one Warning however often it fails; success flips
// Ready with one Normal event.
func TestProfileEnsureSliceFailureBacksOff(t *testing.T) {
	controllers.OnEachKernel(t, testProfileEnsureSliceFailureBacksOff)
}

func testProfileEnsureSliceFailureBacksOff(t *testing.T, k controllers.Kernel) {
	faulty := &failingEnsure{fail: 4}
	h := newHarness(t, k, harnessOptions{wrap: func(b cgroup.Backend) cgroup.Backend {
		faulty.Backend = b
		return faulty
	}})
	h.declare(profile("coder", "", nil))
	key := controllers.ProfileKey("coder")
	h.start()

	h.waitFor("Ready False after the first failure", func() bool {
		st, _ := h.s.Profiles.Get(key)
		c := cond(st.Conditions, v1alpha1.ConditionReady)
		return c.Status == v1alpha1.ConditionFalse && c.Reason == controllers.ReasonSliceFailed &&
			strings.Contains(c.Message, errInjected.Error())
	})
	h.waitFor("Ready True once EnsureSlice works", func() bool {
		st, _ := h.s.Profiles.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	if n := faulty.ensureCalls(); n < 5 {
		t.Errorf("EnsureSlice called %d times, want the 4 failures retried, then success", n)
	}
	want := []string{"Warning:SliceFailed", "Normal:SliceReady"}
	if got := reasons(h.events(key)); !equalStrings(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if evs := h.events(key); evs[0].Count != 1 {
		t.Errorf("SliceFailed recorded %d times, want once", evs[0].Count)
	}
}

// Deleting a profile with orphans: stop kills its live agent (one event),
// then removes the scope and the slice, and forgets the status.
func TestProfileDeletedWithOrphansStop(t *testing.T) {
	controllers.OnEachKernel(t, testProfileDeletedWithOrphansStop)
}

func testProfileDeletedWithOrphansStop(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{})
	h.declare(profile("coder", v1alpha1.OrphansStop, &v1alpha1.Limits{Tasks: ptr[int64](64)}))
	h.start()
	key := controllers.ProfileKey("coder")
	h.waitFor("profile coder Ready", func() bool {
		st, _ := h.s.Profiles.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	c, sc := h.inScope("coder")
	agent := controllers.AgentKey(sc.Name)
	h.waitFor("one live agent", func() bool {
		st, _ := h.s.Profiles.Get(key)
		return st.Agents == 1
	})

	h.s.Desired.Delete(key)
	err := c.Wait(t)
	var exit interface{ Sys() any }
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("child exited with %v, want killed by SIGKILL", err)
	}
	h.waitFor("profile status gone with its slice", func() bool {
		_, ok := h.s.Profiles.Get(key)
		return !ok
	})
	if exists(h.scopeDir(sc)) || exists(h.slicePath("coder")) {
		t.Errorf("scope or slice left behind: scope %v, slice %v", exists(h.scopeDir(sc)), exists(h.slicePath("coder")))
	}
	h.waitFor("agent status gone", func() bool {
		_, ok := h.s.Agents.Get(agent)
		return !ok
	})
	if got, want := reasons(h.events(agent)), []string{"Normal:Stopped"}; !equalStrings(got, want) {
		t.Errorf("agent events = %v, want %v", got, want)
	}
}

// Deleting a profile with orphans: keep leaves its live agent running,
// marked Orphaned with one Warning; once the agent exits, its scope and
// the slice are removed.
func TestProfileDeletedWithOrphansKeep(t *testing.T) {
	controllers.OnEachKernel(t, testProfileDeletedWithOrphansKeep)
}

func testProfileDeletedWithOrphansKeep(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{})
	h.declare(profile("coder", v1alpha1.OrphansKeep, &v1alpha1.Limits{Tasks: ptr[int64](64)}))
	h.start()
	key := controllers.ProfileKey("coder")
	c, sc := h.inScope("coder")
	agent := controllers.AgentKey(sc.Name)
	h.waitFor("one live agent", func() bool {
		st, _ := h.s.Profiles.Get(key)
		return st.Agents == 1 && cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})

	h.s.Desired.Delete(key)
	h.waitFor("agent Orphaned", func() bool {
		st, _ := h.s.Agents.Get(agent)
		return cond(st.Conditions, v1alpha1.ConditionOrphaned).Status == v1alpha1.ConditionTrue
	})
	if c.Exited() {
		t.Fatal("the agent was stopped; orphans: keep must leave it running")
	}
	if !exists(h.scopeDir(sc)) || !exists(h.slicePath("coder")) {
		t.Fatal("scope or slice removed while the agent runs")
	}
	if _, ok := h.s.Profiles.Get(key); !ok {
		t.Error("profile status deleted while its slice still holds an agent")
	}
	if got, want := reasons(h.events(agent)), []string{"Warning:Orphaned"}; !equalStrings(got, want) {
		t.Errorf("agent events = %v, want %v", got, want)
	}

	c.Kill()
	c.Wait(t)
	h.waitFor("profile status gone with its slice", func() bool {
		_, ok := h.s.Profiles.Get(key)
		return !ok
	})
	if exists(h.scopeDir(sc)) || exists(h.slicePath("coder")) {
		t.Errorf("scope or slice left behind: scope %v, slice %v", exists(h.scopeDir(sc)), exists(h.slicePath("coder")))
	}
}

// withoutPIDs is the real backend on a host that, as far as reading back
// shows, holds no pids limit: what a host without the pids controller
// reports.
type withoutPIDs struct{ cgroup.Backend }

func (w withoutPIDs) EnsureSlice(ctx context.Context, profile string, l cgroup.Limits) (cgroup.Applied, error) {
	a, err := w.Backend.EnsureSlice(ctx, profile, l)
	a.Limits.Tasks = 0
	delete(a.Enforced, cgroup.PIDs)
	return a, err
}

// A requested limit that reading back does not show makes Enforced False,
// naming the resource, with one Warning; Ready stays True (the slice
// exists).
func TestProfileLimitNotEnforced(t *testing.T) {
	controllers.OnEachKernel(t, testProfileLimitNotEnforced)
}

func testProfileLimitNotEnforced(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{wrap: func(b cgroup.Backend) cgroup.Backend { return withoutPIDs{b} }})
	h.declare(profile("coder", "", &v1alpha1.Limits{Tasks: ptr[int64](64)}))
	h.start()
	key := controllers.ProfileKey("coder")
	var st v1alpha1.ProfileStatus
	h.waitFor("Enforced False", func() bool {
		st, _ = h.s.Profiles.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionEnforced).Status == v1alpha1.ConditionFalse
	})
	c := cond(st.Conditions, v1alpha1.ConditionEnforced)
	if want := "requested limits not in force: pids (requested 64, applied none)"; c.Reason != controllers.ReasonLimitNotEnforced || c.Message != want {
		t.Errorf("Enforced = %s %q, want %s %q", c.Reason, c.Message, controllers.ReasonLimitNotEnforced, want)
	}
	if cond(st.Conditions, v1alpha1.ConditionReady).Status != v1alpha1.ConditionTrue {
		t.Errorf("Ready = %+v, want True: the slice exists", cond(st.Conditions, v1alpha1.ConditionReady))
	}
	if l := st.Limits; len(l) != 1 || l[0].Requested != 64 || l[0].Applied != 0 || l[0].Enforcement.Level != v1alpha1.LevelAccounted {
		t.Errorf("limits = %+v, want pids requested 64, applied 0, accounted", l)
	}
	if got, want := reasons(h.events(key)), []string{"Warning:LimitNotEnforced"}; !equalStrings(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// busyOnce is the real backend whose first RemoveSlice reports the slice
// busy although it is empty: what a removal sees when the tree moved on
// before the store heard of it, with no later event to come.
type busyOnce struct {
	cgroup.Backend
	busy atomic.Bool
}

func (b *busyOnce) RemoveSlice(ctx context.Context, profile string) error {
	if b.busy.CompareAndSwap(true, false) {
		return fmt.Errorf("slice of profile %q: %w", profile, cgroup.ErrBusy)
	}
	return b.Backend.RemoveSlice(ctx, profile)
}

// A deleted profile whose slice is busy while no scope of it is known is
// retried at once, not after the relist interval: nothing else would
// bring it back.
func TestProfileDeletedBusySliceWithoutScopesIsRetried(t *testing.T) {
	controllers.OnEachKernel(t, testProfileDeletedBusySliceWithoutScopesIsRetried)
}

func testProfileDeletedBusySliceWithoutScopesIsRetried(t *testing.T, k controllers.Kernel) {
	busy := &busyOnce{}
	busy.busy.Store(true)
	h := newHarness(t, k, harnessOptions{
		interval: time.Hour, // far beyond the test's deadline
		wrap: func(b cgroup.Backend) cgroup.Backend {
			busy.Backend = b
			return busy
		},
	})
	h.declare(profile("coder", v1alpha1.OrphansKeep, nil))
	h.start()
	key := controllers.ProfileKey("coder")
	h.waitFor("profile coder Ready", func() bool {
		st, _ := h.s.Profiles.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	h.s.Desired.Delete(key)
	h.waitFor("profile status gone with its slice", func() bool {
		_, ok := h.s.Profiles.Get(key)
		return !ok
	})
	if busy.busy.Load() {
		t.Error("RemoveSlice was never asked")
	}
	if exists(h.slicePath("coder")) {
		t.Error("slice left behind")
	}
}

// A profile whose slice cannot be made makes its workspaces not Ready,
// with the profile's cause; once the slice is made they are Ready again.
func TestProfileSliceFailureMakesItsWorkspacesNotReady(t *testing.T) {
	controllers.OnEachKernel(t, testProfileSliceFailureMakesItsWorkspacesNotReady)
}

func testProfileSliceFailureMakesItsWorkspacesNotReady(t *testing.T, k controllers.Kernel) {
	faulty := &failingEnsure{fail: 3}
	h := newHarness(t, k, harnessOptions{wrap: func(b cgroup.Backend) cgroup.Backend {
		faulty.Backend = b
		return faulty
	}})
	h.declare(profile("coder", "", nil))
	h.declare(workspace("web", t.TempDir(), "coder"))
	key := controllers.WorkspaceKey("web")
	h.start()

	h.waitFor("web not Ready for its profile", func() bool {
		st, _ := h.s.Workspaces.Get(key)
		c := cond(st.Conditions, v1alpha1.ConditionReady)
		return c.Status == v1alpha1.ConditionFalse && c.Reason == controllers.ReasonProfileNotReady &&
			strings.Contains(c.Message, "profile coder is not Ready") && strings.Contains(c.Message, errInjected.Error())
	})
	h.waitFor("web Ready once the slice is made", func() bool {
		st, _ := h.s.Workspaces.Get(key)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
}
