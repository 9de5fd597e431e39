package cgroupfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// The tests here run cgroupfs on a model of each host layout
// (cgrouptest.Kernel), as anyone, whatever this machine's layout is.

// modelBackend is cgroupfs on a model of layout l, its Root /marshal.
func modelBackend(t *testing.T, l cgrouptest.Layout) (*Backend, *cgrouptest.Kernel) {
	t.Helper()
	k := cgrouptest.NewKernel(t, l)
	b, err := New(Options{Root: "/marshal", Mounts: k.Mounts(), FS: k})
	if l == cgrouptest.LayoutV1 {
		if !errors.Is(err, cgroup.ErrUnavailable) {
			t.Fatalf("New on a v1-only host = %v, want cgroup.ErrUnavailable", err)
		}
		t.Skip("cgroupfs needs a cgroup2 mount; a v1-only host has none")
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, k
}

// onEachLayout runs test on a model of each layout.
func onEachLayout(t *testing.T, test func(t *testing.T, l cgrouptest.Layout, b *Backend, k *cgrouptest.Kernel)) {
	for _, l := range cgrouptest.Layouts {
		t.Run(string(l), func(t *testing.T) {
			b, k := modelBackend(t, l)
			test(t, l, b, k)
		})
	}
}

// layoutMethod is how layout l holds every resource.
func layoutMethod(l cgrouptest.Layout) cgroup.Method {
	if l == cgrouptest.LayoutV2 {
		return cgroup.MethodCgroupV2
	}
	return cgroup.MethodCgroupV1
}

// The probe reports kernel enforcement wherever the layout gives it, also
// once marshal's tree exists without controllers enabled in it (Watch
// makes it first), and leaves no scratch group behind.
func TestProbeOnEachLayout(t *testing.T) {
	onEachLayout(t, func(t *testing.T, l cgrouptest.Layout, b *Backend, k *cgrouptest.Kernel) {
		if _, err := cgroup.MkdirAll(k, b.v2(b.tree)); err != nil {
			t.Fatal(err)
		}
		caps, err := b.Probe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		m := layoutMethod(l)
		for _, r := range cgroup.AllResources {
			want := cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: m, Controller: cgroup.LimitFile(r, m)}
			if caps[r] != want {
				t.Errorf("Probe %s = %+v, want %+v", r, caps[r], want)
			}
		}
		for _, mnt := range append([]string{k.Mounts().V2}, slices.Collect(mapValues(k.Mounts().V1))...) {
			ents, _ := os.ReadDir(filepath.Join(mnt, b.root))
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "marshal-probe-") {
					t.Errorf("probe left %s in %s", e.Name(), mnt)
				}
			}
		}
	})
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// A scope's limits are written before its process moves in and read
// back; every scope has every controller's files, so that a scope with a
// cpu limit alone still shows memory.max, memory.events and pids.current.
func TestScopeLimitsOnEachLayout(t *testing.T) {
	onEachLayout(t, func(t *testing.T, l cgrouptest.Layout, b *Backend, k *cgrouptest.Kernel) {
		ctx := t.Context()
		if _, err := b.EnsureSlice(ctx, "coder", cgroup.Limits{CPUMilli: 500, MemoryBytes: 256 << 20, Tasks: 100}); err != nil {
			t.Fatal(err)
		}
		full := cgroup.Limits{CPUMilli: 250, MemoryBytes: 64 << 20, Tasks: 40}
		for _, want := range []cgroup.Limits{{CPUMilli: 250}, full} {
			c := startChild(t, nil, "sleep", "600")
			s, applied, err := b.CreateScope(ctx, "coder", scope.NewID(), c.PID(), want)
			if err != nil {
				t.Fatal(err)
			}
			checkApplied(t, b, applied, want)
			checkFiles(t, b, s.Path, want)
			back, err := b.ScopeLimits(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			checkApplied(t, b, back, want)
			if l == cgrouptest.LayoutV2 {
				for _, f := range []string{cgroup.FileMemoryMax, cgroup.FileMemoryEvents, cgroup.FilePIDsMax, cgroup.FilePIDsCurrent, cgroup.FileCPUMax} {
					if !exists(filepath.Join(b.v2(s.Path), f)) {
						t.Errorf("scope with limits %+v has no %s", want, f)
					}
				}
			}
			if u, err := b.Usage(ctx, s); err != nil || (l == cgrouptest.LayoutV2 && u.Tasks != 1) {
				t.Errorf("Usage = %+v, %v; want 1 task", u, err)
			}
			killAndRemove(t, b, s)
		}
		if err := b.RemoveSlice(ctx, "coder"); err != nil {
			t.Fatal(err)
		}
	})
}

// killAndRemove kills scope s, waits until it is empty and removes it.
func killAndRemove(t *testing.T, b *Backend, s cgroup.Scope) {
	t.Helper()
	if err := b.Kill(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
	defer cancel()
	if _, err := cgroup.WaitEvents(ctx, b.v2(s.Path), func(ev cgroup.GroupEvents) bool { return !ev.Populated }); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveScope(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}

// On pure cgroup v2, a Root that holds processes cannot enable
// controllers for marshal's tree: the probe says so per resource, and a
// slice's limits are refused with the reason.
func TestRootWithProcessesGivesNoKernelLimits(t *testing.T) {
	b, k := modelBackend(t, cgrouptest.LayoutV2)
	root := b.v2(b.root)
	if err := k.Mkdir(root); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, nil, "sleep", "600")
	if err := cgroup.MoveProcess(k, root, c.PID()); err != nil {
		t.Fatal(err)
	}
	caps, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cgroup.AllResources {
		if e := caps[r]; e.Level == v1alpha1.LevelKernel || !strings.Contains(e.Reason, root+" holds processes") {
			t.Errorf("Probe %s = %+v, want below kernel, the reason naming %s", r, e, root)
		}
	}
	_, err = b.EnsureSlice(t.Context(), "coder", cgroup.Limits{Tasks: 10})
	if !errors.Is(err, errNoDelegation) || !strings.Contains(err.Error(), "holds processes") {
		t.Errorf("EnsureSlice = %v, want the no-internal-process rule named", err)
	}
}

// A controller the parent of Root does not delegate is reported below
// kernel with the reason; the others stay kernel.
func TestUndelegatedControllerHasAReason(t *testing.T) {
	b, k := modelBackend(t, cgrouptest.LayoutV2)
	if err := k.WriteFile(k.Mounts().V2, cgroup.FileSubtreeControl, "-memory"); err != nil {
		t.Fatal(err)
	}
	caps, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e := caps[cgroup.Memory]; e.Level != v1alpha1.LevelAccounted || !strings.Contains(e.Reason, "memory are not enabled for /marshal") {
		t.Errorf("Probe memory = %+v, want accounted with the reason", e)
	}
	for _, r := range []cgroup.Resource{cgroup.CPU, cgroup.PIDs} {
		if caps[r].Level != v1alpha1.LevelKernel {
			t.Errorf("Probe %s = %+v, want kernel", r, caps[r])
		}
	}
	applied, err := b.EnsureSlice(t.Context(), "coder", cgroup.Limits{CPUMilli: 100, MemoryBytes: 64 << 20})
	if !errors.Is(err, errNoDelegation) || applied.Limits.CPUMilli != 100 {
		t.Errorf("EnsureSlice = %+v, %v; want the cpu limit held and memory refused", applied, err)
	}
}
