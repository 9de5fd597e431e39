package cgroupfs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

var lifecycle = []cgroup.EventType{cgroup.ScopeCreated, cgroup.ScopePopulated, cgroup.ScopeEmptied, cgroup.ScopeRemoved}

// watchBackend runs b.Watch until the test ends and checks that it then
// returns context.Canceled. It returns once the tree is watched: Watch
// reports an existing marker scope first.
func watchBackend(t *testing.T, b *Backend) *recorder {
	t.Helper()
	if err := os.MkdirAll(b.v2(b.scopeRel("watch-ready", scope.NewID())), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	rec := newRecorder()
	done := make(chan error, 1)
	go func() { done <- b.Watch(ctx, rec.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	})
	testutil.Eventually(t, rec.wake, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.events) > 0
	}, "the initial relist")
	return rec
}

func TestCreateScopeHoldsTheWholeProcessTree(t *testing.T) {
	b, tree := newBackend(t)
	rec := watchBackend(t, b)
	ctx := t.Context()

	// The shell forks its grandchild only after it has been moved.
	sh := startChild(t, nil, "sh", "-c", "read x; sleep 60 >/dev/null & echo $!; wait")
	id := scope.NewID()
	s, applied, err := b.CreateScope(ctx, "my-agent", id, sh.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantName := scope.ScopeName("my-agent", id)
	wantPath := path.Join(tree.Rel, "x", "marshal.slice", scope.SliceName("my-agent"), wantName)
	if s.Name != wantName || s.Profile != "my-agent" || s.ID != id || s.Path != wantPath || !s.Populated {
		t.Errorf("CreateScope = %+v, want %s at %s, populated", s, wantName, wantPath)
	}
	if len(applied.Enforced) != 0 || applied.Limits != (cgroup.Limits{}) {
		t.Errorf("CreateScope without limits applied %+v", applied)
	}
	sh.Say(t, "go")
	grandchild, err := strconv.Atoi(sh.Line(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{sh.PID(), grandchild} {
		got := identityOf(t, pid)
		if got.Profile != "my-agent" || got.ID != id || got.Scope != wantName || got.Path != wantPath {
			t.Errorf("scope.Parse of pid %d's cgroup = %+v, want profile my-agent, id %s, path %s", pid, got, id, wantPath)
		}
	}
	rec.waitLast(t, wantName, cgroup.ScopePopulated)

	list, err := b.ListScopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(l cgroup.Scope) bool { return l == s }) {
		t.Errorf("ListScopes = %+v, want it to hold %+v", list, s)
	}
	u, err := b.Usage(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if u.Tasks != 2 {
		t.Errorf("Usage.Tasks = %d, want 2 (the shell and its sleep)", u.Tasks)
	}

	if err := b.RemoveScope(ctx, s); !errors.Is(err, cgroup.ErrBusy) {
		t.Errorf("RemoveScope of a populated scope = %v, want ErrBusy", err)
	}
	other := startChild(t, nil, "sleep", "60")
	if _, _, err := b.CreateScope(ctx, "my-agent", id, other.PID(), cgroup.Limits{}); !errors.Is(err, cgroup.ErrExists) {
		t.Errorf("CreateScope of an existing scope = %v, want ErrExists", err)
	}
	if got := procCgroupOf(t, other.PID()).v2; got == wantPath {
		t.Errorf("a refused CreateScope moved pid %d into %s", other.PID(), got)
	}

	if err := b.Kill(ctx, s); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, wantName, cgroup.ScopeEmptied)
	if err := sh.Wait(t); !testutil.KilledBy(err, syscall.SIGKILL) {
		t.Errorf("shell ended with %v, want SIGKILL", err)
	}
	if !dead(t, grandchild) {
		t.Errorf("grandchild %d still alive after Kill", grandchild)
	}

	if err := b.RemoveScope(ctx, s); err != nil {
		t.Fatal(err)
	}
	rec.waitLast(t, wantName, cgroup.ScopeRemoved)
	if got := rec.of(wantName); !slices.Equal(got, lifecycle) {
		t.Errorf("watch reported %v for %s, want %v", got, wantName, lifecycle)
	}
	if exists(b.v2(s.Path)) {
		t.Errorf("%s still exists after RemoveScope", s.Path)
	}

	// Gone, the scope is no error to remove or kill, and not found to read.
	if err := b.RemoveScope(ctx, s); err != nil {
		t.Errorf("RemoveScope of a removed scope = %v, want nil", err)
	}
	if err := b.Kill(ctx, s); err != nil {
		t.Errorf("Kill of a removed scope = %v, want nil", err)
	}
	if _, err := b.Usage(ctx, s); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("Usage of a removed scope = %v, want ErrNotFound", err)
	}
	if _, err := b.ScopeLimits(ctx, s); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("ScopeLimits of a removed scope = %v, want ErrNotFound", err)
	}
}

// dead reports whether pid is gone or a zombie; a killed orphan stays a
// zombie until whoever adopted it reaps it.
func dead(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: comm may hold spaces, so look after the last ')'.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func TestCreateScopeFailuresLeaveNothingBehind(t *testing.T) {
	b, _ := newBackend(t)
	ctx := t.Context()
	gone := startChild(t, nil, "true")
	gone.Wait(t)
	sleeper := startChild(t, nil, "sleep", "60")
	before := procCgroupOf(t, sleeper.PID())

	// A stale v1 group under the scope's name (a crash mid-way) makes the
	// scope exist; the cgroup2 group just made must go again.
	staleID := scope.NewID()
	var stale string
	if dir := b.v1(cgroup.PIDs, b.scopeRel("coder", staleID)); dir != "" {
		stale = dir
		if err := os.MkdirAll(stale, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name    string
		profile string
		id      string
		pid     int
		limits  cgroup.Limits
		wantErr error
		skip    bool
	}{
		{name: "process_gone", profile: "coder", id: scope.NewID(), pid: gone.PID(), limits: cgroup.Limits{Tasks: 10, MemoryBytes: 64 << 20}, wantErr: cgroup.ErrNoProcess},
		{name: "process_gone_without_limits", profile: "coder", id: scope.NewID(), pid: gone.PID(), wantErr: cgroup.ErrNoProcess},
		{name: "bad_pid", profile: "coder", id: scope.NewID(), pid: 0, wantErr: cgroup.ErrNoProcess},
		{name: "stale_v1_group", profile: "coder", id: staleID, pid: sleeper.PID(), limits: cgroup.Limits{Tasks: 10}, wantErr: cgroup.ErrExists, skip: stale == ""},
		{name: "invalid_profile", profile: "No_Such", id: scope.NewID(), pid: sleeper.PID()},
		{name: "invalid_id", profile: "coder", id: "XYZ", pid: sleeper.PID()},
		{name: "impossible_cpu_quota", profile: "coder", id: scope.NewID(), pid: sleeper.PID(), limits: cgroup.Limits{CPUMilli: 1}, skip: expectedMethod(t, b.mounts, cgroup.CPU) == ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("needs a v1 pids or cpu controller")
			}
			_, _, err := b.CreateScope(ctx, tc.profile, tc.id, tc.pid, tc.limits)
			if err == nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("CreateScope = %v, want %v", err, tc.wantErr)
			}
			if !scope.ValidID(tc.id) || len(v1alpha1.ValidateName(tc.profile)) > 0 {
				return
			}
			rel := b.scopeRel(tc.profile, tc.id)
			for _, dir := range append(b.v1Dirs(rel), b.v2(rel)) {
				if exists(dir) && dir != stale {
					t.Errorf("%s left behind", dir)
				}
			}
		})
	}
	if after := procCgroupOf(t, sleeper.PID()); after.v2 != before.v2 || !mapsEqual(after.v1, before.v1) {
		t.Errorf("refused CreateScopes moved pid %d: %+v, was %+v", sleeper.PID(), after, before)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestScopeOperationsRefuseForeignScopes(t *testing.T) {
	b, _ := newBackend(t)
	ctx := t.Context()
	id := scope.NewID()
	tests := []struct {
		name string
		s    cgroup.Scope
	}{
		{name: "not_a_scope_name", s: cgroup.Scope{Name: "session-1.scope"}},
		{name: "path_elsewhere", s: cgroup.Scope{Name: scope.ScopeName("coder", id), Path: "/user.slice/" + scope.ScopeName("coder", id)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.RemoveScope(ctx, tc.s); err == nil {
				t.Error("RemoveScope: no error")
			}
			if err := b.Kill(ctx, tc.s); err == nil {
				t.Error("Kill: no error")
			}
			if _, err := b.Usage(ctx, tc.s); err == nil {
				t.Error("Usage: no error")
			}
			if _, err := b.ScopeLimits(ctx, tc.s); err == nil {
				t.Error("ScopeLimits: no error")
			}
		})
	}
}

func TestListScopesSortedAndOnlyMarshalScopes(t *testing.T) {
	b, _ := newBackend(t)
	ctx := t.Context()
	if got, err := b.ListScopes(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ListScopes of a missing tree = %v, %v; want none", got, err)
	}
	var want []string
	for _, p := range []string{"zeta", "alpha", "my-agent"} {
		for range 2 {
			id := scope.NewID()
			if err := os.MkdirAll(b.v2(b.scopeRel(p, id)), 0o755); err != nil {
				t.Fatal(err)
			}
			want = append(want, scope.ScopeName(p, id))
		}
	}
	// Groups that are not marshal scopes of their slice are not listed.
	for _, rel := range []string{
		path.Join(b.tree, "other.slice", scope.ScopeName("coder", scope.NewID())),
		path.Join(b.sliceRel("alpha"), scope.ScopeName("zeta", scope.NewID())),
		path.Join(b.sliceRel("alpha"), "helper"),
	} {
		if err := os.MkdirAll(b.v2(rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	got, err := b.ListScopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
		if want := b.scopeRel(s.Profile, s.ID); s.Path != want || s.Populated {
			t.Errorf("listed %+v, want path %s, not populated", s, want)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("ListScopes = %q, want %q", names, want)
	}
}

func TestEnsureSliceSetsReadsBackAndCorrectsDrift(t *testing.T) {
	b, _ := newBackend(t)
	ctx := t.Context()
	var want cgroup.Limits
	for _, r := range cgroup.AllResources {
		if expectedMethod(t, b.mounts, r) == "" {
			continue
		}
		switch r {
		case cgroup.CPU:
			want.CPUMilli = 500
		case cgroup.Memory:
			want.MemoryBytes = 256 << 20
		case cgroup.PIDs:
			want.Tasks = 100
		}
	}
	if want == (cgroup.Limits{}) {
		t.Skip("needs a cpu, memory or pids controller")
	}
	applied, err := b.EnsureSlice(ctx, "coder", want)
	if err != nil {
		t.Fatal(err)
	}
	checkApplied(t, b, applied, want)
	rel := b.sliceRel("coder")
	checkFiles(t, b, rel, want)

	// Drift: values written behind marshal's back are restored.
	for _, r := range cgroup.AllResources {
		m := b.methods[r]
		if want.Get(r) == 0 {
			continue
		}
		dir, file, v := b.limitDir(r, rel), cgroup.LimitFile(r, m), "50"
		switch {
		case r == cgroup.CPU && m == cgroup.MethodCgroupV2:
			v = "20000 100000"
		case r == cgroup.CPU:
			v = "20000"
		case r == cgroup.Memory:
			v = strconv.Itoa(128 << 20)
		}
		if err := cgroup.WriteFile(dir, file, v); err != nil {
			t.Fatal(err)
		}
	}
	if applied, err = b.EnsureSlice(ctx, "coder", want); err != nil {
		t.Fatal(err)
	}
	checkApplied(t, b, applied, want)
	checkFiles(t, b, rel, want)

	// A limit set to zero is removed; the others stay.
	fewer := want
	fewer.Tasks = 0
	if applied, err = b.EnsureSlice(ctx, "coder", fewer); err != nil {
		t.Fatal(err)
	}
	checkApplied(t, b, applied, fewer)
	checkFiles(t, b, rel, fewer)

	// A scope of the slice joins every hierarchy where the slice has a
	// limit, even without limits of its own, so the slice's limits hold it.
	sleeper := startChild(t, nil, "sleep", "60")
	s, _, err := b.CreateScope(ctx, "coder", scope.NewID(), sleeper.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	where := procCgroupOf(t, sleeper.PID())
	for _, r := range cgroup.AllResources {
		if fewer.Get(r) != 0 && b.methods[r] == cgroup.MethodCgroupV1 {
			if got := where.v1[cgroup.Controller(r)]; got != s.Path {
				t.Errorf("pid %d is in %s group %s, want %s", sleeper.PID(), r, got, s.Path)
			}
		}
	}

	if err := b.RemoveSlice(ctx, "coder"); !errors.Is(err, cgroup.ErrBusy) {
		t.Errorf("RemoveSlice with a scope inside = %v, want ErrBusy", err)
	}
	if err := b.Kill(ctx, s); err != nil {
		t.Fatal(err)
	}
	sleeper.Wait(t)
	if err := b.RemoveScope(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveSlice(ctx, "coder"); err != nil {
		t.Fatal(err)
	}
	for _, dir := range append(b.v1Dirs(rel), b.v2(rel)) {
		if exists(dir) {
			t.Errorf("%s left after RemoveSlice", dir)
		}
	}
	if err := b.RemoveSlice(ctx, "coder"); err != nil {
		t.Errorf("RemoveSlice of a removed slice = %v, want nil", err)
	}
}

// checkApplied checks that applied holds exactly want, each through the
// controller file this host has for it.
func checkApplied(t *testing.T, b *Backend, applied cgroup.Applied, want cgroup.Limits) {
	t.Helper()
	if applied.Limits != want || !applied.Satisfies(want) {
		t.Errorf("applied limits %+v, want %+v", applied.Limits, want)
	}
	for _, r := range cgroup.AllResources {
		e, ok := applied.Enforced[r]
		if want.Get(r) == 0 {
			if ok {
				t.Errorf("applied %s enforcement %+v for no limit", r, e)
			}
			continue
		}
		m := expectedMethod(t, b.mounts, r)
		if wantE := (cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: m, Controller: cgroup.LimitFile(r, m)}); e != wantE {
			t.Errorf("applied %s enforcement %+v, want %+v", r, e, wantE)
		}
	}
}

// checkFiles reads the kernel's limit files of group rel and checks they
// hold want, in the kernel's own format.
func checkFiles(t *testing.T, b *Backend, rel string, want cgroup.Limits) {
	t.Helper()
	for _, r := range cgroup.AllResources {
		m := b.methods[r]
		dir := b.limitDir(r, rel)
		if dir == "" || (want.Get(r) == 0 && !exists(dir)) {
			continue
		}
		file := cgroup.LimitFile(r, m)
		got, err := cgroup.ReadFile(dir, file)
		if err != nil {
			t.Fatal(err)
		}
		w := want.Get(r)
		var wantS string
		switch {
		case r == cgroup.CPU && m == cgroup.MethodCgroupV2:
			wantS = cgroup.CPUMaxFromMilli(w).String()
		case r == cgroup.CPU:
			wantS = strconv.FormatInt(cgroup.CPUMaxFromMilli(w).Quota, 10)
			if w == 0 {
				wantS = "-1"
			}
			if p, _ := cgroup.ReadFile(dir, cgroup.FileCFSPeriod); p != "100000" {
				t.Errorf("%s/%s = %s, want 100000", dir, cgroup.FileCFSPeriod, p)
			}
		case r == cgroup.Memory && m == cgroup.MethodCgroupV1 && w == 0:
			wantS = strconv.FormatInt(int64(^uint64(0)>>1)&^int64(os.Getpagesize()-1), 10)
		default:
			wantS = cgroup.FormatMax(w)
		}
		if got != wantS {
			t.Errorf("%s/%s = %q, want %q", dir, file, got, wantS)
		}
	}
}

func TestProbeReportsWhatThisHostEnforces(t *testing.T) {
	b, tree := newBackend(t)
	caps, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cgroup.AllResources {
		var want cgroup.Enforcement
		switch m := expectedMethod(t, b.mounts, r); {
		case m != "":
			want = cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: m, Controller: cgroup.LimitFile(r, m)}
		case r == cgroup.CPU:
			want = cgroup.Enforcement{Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS}
		default:
			want = cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}
		}
		if caps[r] != want {
			t.Errorf("Probe()[%s] = %+v, want %+v", r, caps[r], want)
		}
	}
	// The scratch groups, and the Root they needed, are gone again.
	for _, mnt := range tree.Mounts.V1 {
		if dir := filepath.Join(mnt, tree.Rel, "x"); exists(dir) {
			t.Errorf("Probe left %s behind", dir)
		}
	}
}

func TestNewRefusesHostsItCannotWorkOn(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantErr  error
		wantText string
	}{
		{name: "no_cgroup2_mount", opts: Options{Mounts: cgroup.Mounts{V1: map[string]string{"cpu": "/sys/fs/cgroup/cpu"}}}, wantErr: cgroup.ErrUnavailable, wantText: "no cgroup2 mount"},
		{name: "not_cgroup2", opts: Options{Mounts: cgroup.Mounts{V2: t.TempDir()}}, wantErr: cgroup.ErrUnavailable, wantText: "not a cgroup2 mount"},
		{name: "relative_root", opts: Options{Root: "marshal"}, wantText: "clean absolute path"},
		{name: "unclean_root", opts: Options{Root: "/a/../marshal"}, wantText: "clean absolute path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("New(%+v) = %v, want %v saying %q", tc.opts, err, tc.wantErr, tc.wantText)
			}
		})
	}
}

func TestNewRefusesAReadOnlyCgroup2Mount(t *testing.T) {
	testutil.RequireRoot(t)
	m, err := cgroup.ReadMounts()
	if err != nil || m.V2 == "" {
		t.Skip("needs a cgroup2 mount")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1) to make a private mount namespace")
	}
	// A read-only bind mount of cgroup2 in a private mount namespace: the
	// host's mount is untouched and the copy vanishes with the namespace.
	ro := t.TempDir()
	script := `mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && exec "$3"`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", m.V2, ro, os.Args[0])
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	cmd.Env = append(os.Environ(), helperEnv+"=new", "MARSHAL_CGROUPFS_TEST_MOUNT="+ro, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("New on a read-only cgroup2 mount: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "read-only") {
		t.Errorf("New on a read-only cgroup2 mount said %q, want it to say read-only", out)
	}
}

func TestKillByFreezingKillsTheWholeTree(t *testing.T) {
	b, _ := newBackend(t)
	ctx := t.Context()
	sh := startChild(t, nil, "sh", "-c", "read x; sleep 60 >/dev/null & sleep 60 >/dev/null & echo ok; wait")
	s, _, err := b.CreateScope(ctx, "coder", scope.NewID(), sh.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sh.Say(t, "go")
	sh.Line(t)
	dir := b.v2(s.Path)
	// The fallback Kill uses where the kernel has no cgroup.kill.
	if err := cgroup.SignalTree(ctx, cgroup.Host, dir, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, testutil.Deadline)
	defer cancel()
	if _, err := cgroup.WaitEvents(wctx, dir, func(ev cgroup.GroupEvents) bool { return !ev.Populated }); err != nil {
		t.Fatal(err)
	}
	if err := sh.Wait(t); !testutil.KilledBy(err, syscall.SIGKILL) {
		t.Errorf("shell ended with %v, want SIGKILL", err)
	}
	if ev, err := cgroup.ReadEvents(dir); err != nil || ev.Frozen {
		t.Errorf("scope left frozen: %+v, %v", ev, err)
	}
	if err := b.RemoveScope(ctx, s); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveScopeTakesEmptyChildGroupsAlong(t *testing.T) {
	b, _ := newBackend(t)
	ctx := t.Context()
	sleeper := startChild(t, nil, "sleep", "60")
	s, _, err := b.CreateScope(ctx, "nester", scope.NewID(), sleeper.PID(), cgroup.Limits{Tasks: 20})
	if err != nil {
		t.Fatal(err)
	}
	// The agent made groups of its own inside its scope and moved itself
	// into the deepest one.
	deep := filepath.Join(b.v2(s.Path), "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cgroup.MoveProcess(cgroup.Host, deep, sleeper.PID()); err != nil {
		t.Fatal(err)
	}
	if got := identityOf(t, sleeper.PID()); got.Path != s.Path {
		t.Errorf("a process in a group inside the scope resolves to %s, want %s", got.Path, s.Path)
	}
	if err := b.RemoveScope(ctx, s); !errors.Is(err, cgroup.ErrBusy) {
		t.Fatalf("RemoveScope with a process in a child group = %v, want ErrBusy", err)
	}
	if !exists(deep) {
		t.Fatal("a refused RemoveScope removed a child group")
	}
	if err := b.Kill(ctx, s); err != nil {
		t.Fatal(err)
	}
	sleeper.Wait(t)
	wctx, cancel := context.WithTimeout(ctx, testutil.Deadline)
	defer cancel()
	if _, err := cgroup.WaitEvents(wctx, b.v2(s.Path), func(ev cgroup.GroupEvents) bool { return !ev.Populated }); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveScope(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, dir := range append(b.v1Dirs(s.Path), b.v2(s.Path)) {
		if exists(dir) {
			t.Errorf("%s left after RemoveScope", dir)
		}
	}
}
