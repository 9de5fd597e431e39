package controllers_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/scope"
)

// The host's status: measured from the machine, each declared capacity
// field overriding its measurement, the enforcement the backend probes,
// under the declared Host's key or Host/local.
func TestHostStatus(t *testing.T) { controllers.OnEachKernel(t, testHostStatus) }

func testHostStatus(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{})
	caps := h.requireKernel()
	// The tree a previous run left: the probe must see past it.
	if err := k.Mkdir(path.Join(k.Root, scope.RootSlice)); err != nil {
		t.Fatal(err)
	}
	h.start()
	local, big := controllers.HostKey(controllers.LocalHost), controllers.HostKey("big")

	var st v1alpha1.HostStatus
	h.waitFor("Host/local Ready", func() bool {
		st, _ = h.s.Hosts.Get(local)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	m := st.Measured
	if m.CPUMilli != int64(runtime.NumCPU())*1000 || m.MemoryBytes != memTotal(t) || m.Tasks <= 0 {
		t.Errorf("measured = %+v, want cpu %d, memory %d, tasks > 0", m, runtime.NumCPU()*1000, memTotal(t))
	}
	if st.Capacity != m {
		t.Errorf("capacity with no Host declared = %+v, want the measured %+v", st.Capacity, m)
	}
	if st.Backend != k.Name {
		t.Errorf("backend = %q, want %s", st.Backend, k.Name)
	}
	if len(st.Enforcement) != len(cgroup.AllResources) {
		t.Fatalf("enforcement = %+v, want one per resource", st.Enforcement)
	}
	for i, r := range cgroup.AllResources {
		e, c := st.Enforcement[i], caps[r]
		if e.Resource != string(r) || e.Level != c.Level || e.Method != string(c.Method) || e.Controller != c.Controller || e.Reason != c.Reason {
			t.Errorf("enforcement of %s = %+v, want the probe's %+v", r, e, c)
		}
		// A pure v2 host gives every controller to marshal's tree, also
		// once the tree exists (the probe before start ran without it).
		if want := cgroup.LimitFile(r, cgroup.MethodCgroupV2); k.Layout == cgrouptest.LayoutV2 &&
			(e.Level != v1alpha1.LevelKernel || e.Method != string(cgroup.MethodCgroupV2) || e.Controller != want) {
			t.Errorf("enforcement of %s on a pure cgroup v2 host = %+v, want kernel through %s", r, e, want)
		}
	}
	if got := reasons(h.events(local)); len(got) != 0 {
		t.Errorf("events of a host that came up fine = %v, want none", got)
	}

	steps := []struct {
		name     string
		key      string
		capacity *v1alpha1.Capacity
		want     func(m v1alpha1.Amounts) v1alpha1.Amounts
	}{
		{name: "declared_local_without_capacity", key: "local",
			want: func(m v1alpha1.Amounts) v1alpha1.Amounts { return m }},
		{name: "declared_cpu_only", key: "local", capacity: &v1alpha1.Capacity{CPUMilli: ptr[int64](1600)},
			want: func(m v1alpha1.Amounts) v1alpha1.Amounts { m.CPUMilli = 1600; return m }},
		{name: "declared_memory_and_tasks", key: "local",
			capacity: &v1alpha1.Capacity{MemoryBytes: ptr[int64](8 << 30), Tasks: ptr[int64](4096)},
			want:     func(m v1alpha1.Amounts) v1alpha1.Amounts { m.MemoryBytes, m.Tasks = 8<<30, 4096; return m }},
		{name: "declared_all_under_another_name", key: "big",
			capacity: &v1alpha1.Capacity{CPUMilli: ptr[int64](1), MemoryBytes: ptr[int64](2), Tasks: ptr[int64](3)},
			want: func(v1alpha1.Amounts) v1alpha1.Amounts {
				return v1alpha1.Amounts{CPUMilli: 1, MemoryBytes: 2, Tasks: 3}
			}},
	}
	gen := int64(0)
	for _, step := range steps {
		for _, k := range h.s.Desired.Keys(v1alpha1.KindHost) {
			if k.Name != step.key {
				h.s.Desired.Delete(k)
				gen = 0
			}
		}
		h.declare(host(step.key, step.capacity))
		gen++
		key := controllers.HostKey(step.key)
		want := step.want(m)
		h.waitFor(step.name, func() bool {
			st, _ = h.s.Hosts.Get(key)
			return st.ObservedGeneration == gen && st.Capacity == want
		})
		if cond(st.Conditions, v1alpha1.ConditionReady).ObservedGeneration != gen {
			t.Errorf("%s: Ready observedGeneration = %d, want %d", step.name,
				cond(st.Conditions, v1alpha1.ConditionReady).ObservedGeneration, gen)
		}
		if st.Measured != m {
			t.Errorf("%s: measured = %+v, want %+v whatever is declared", step.name, st.Measured, m)
		}
	}
	h.waitFor("Host/local status gone once Host big is declared", func() bool {
		_, ok := h.s.Hosts.Get(local)
		return !ok && h.s.Hosts.Len() == 1
	})

	h.s.Desired.Delete(big)
	h.waitFor("back to Host/local when no Host is declared", func() bool {
		st, _ = h.s.Hosts.Get(local)
		_, bigLeft := h.s.Hosts.Get(big)
		return !bigLeft && st.Capacity == m && st.ObservedGeneration == 0
	})
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// failingProbe is the real backend, except that Probe fails its first
// fail calls the way the real one fails: with a partial result.
type failingProbe struct {
	cgroup.Backend
	mu    sync.Mutex
	fail  int
	calls int
}

func (f *failingProbe) Probe(ctx context.Context) (cgroup.Capabilities, error) {
	caps, err := f.Backend.Probe(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fail {
		return caps, fmt.Errorf("probing pids: %w", errInjected)
	}
	return caps, err
}

// A failing probe makes Ready False with one Warning, retried with
// backoff until it works: then one Normal event.
func TestHostProbeFailure(t *testing.T) { controllers.OnEachKernel(t, testHostProbeFailure) }

func testHostProbeFailure(t *testing.T, k controllers.Kernel) {
	h := newHarness(t, k, harnessOptions{wrap: func(b cgroup.Backend) cgroup.Backend {
		return &failingProbe{Backend: b, fail: 3}
	}})
	h.start()
	local := controllers.HostKey(controllers.LocalHost)
	h.waitFor("Ready False", func() bool {
		st, _ := h.s.Hosts.Get(local)
		c := cond(st.Conditions, v1alpha1.ConditionReady)
		return c.Status == v1alpha1.ConditionFalse && c.Reason == controllers.ReasonProbeFailed &&
			strings.Contains(c.Message, errInjected.Error())
	})
	h.waitFor("Ready True", func() bool {
		st, _ := h.s.Hosts.Get(local)
		return cond(st.Conditions, v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue
	})
	evs := h.events(local)
	if got, want := reasons(evs), []string{"Warning:ProbeFailed", "Normal:Probed"}; !equalStrings(got, want) || evs[0].Count != 1 {
		t.Errorf("events = %v, want one ProbeFailed then Probed", evs)
	}
}
