package systemd

import (
	"context"
	"errors"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

var lifecycle = []cgroup.EventType{cgroup.ScopeCreated, cgroup.ScopePopulated, cgroup.ScopeEmptied, cgroup.ScopeRemoved}

func TestScopeLifecycle(t *testing.T) {
	for _, conn := range connections {
		t.Run(conn.name, func(t *testing.T) {
			m := requireManager(t)
			b := newBackend(t, conn.bus(m), Options{})
			events := startWatch(t, b)
			ctx := t.Context()
			const profile = "my-agent"
			id := scope.NewID()
			c := startChild(t, "read line")

			s, applied, err := b.CreateScope(ctx, profile, id, c.PID(), cgroup.Limits{})
			if err != nil {
				t.Fatalf("CreateScope() = %v", err)
			}
			want := cgroup.Scope{
				Name:      scope.ScopeName(profile, id),
				Profile:   profile,
				ID:        id,
				Path:      path.Join(m.Cgroup, "marshal.slice", `marshal-my\x2dagent.slice`, `marshal-my\x2dagent-`+id+".scope"),
				Populated: true,
			}
			if s != want {
				t.Fatalf("CreateScope() = %+v, want %+v", s, want)
			}
			if applied.Limits != (cgroup.Limits{}) || len(applied.Enforced) != 0 {
				t.Errorf("CreateScope() applied = %+v, want no limits", applied)
			}
			if state := unitState(t, b, s.Name); state != "active" {
				t.Errorf("unit %s is %q, want active", s.Name, state)
			}

			// The name is the registration: the child's own cgroup says
			// which profile and launch it belongs to.
			got, ok := scope.Parse(cgroup2Of(t, c.PID()))
			wantID := scope.Identity{Profile: profile, ID: id, Scope: s.Name, Path: s.Path}
			if !ok || got != wantID {
				t.Fatalf("scope.Parse(/proc/%d/cgroup) = %+v, %v, want %+v", c.PID(), got, ok, wantID)
			}

			list, err := b.ListScopes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(list, s) {
				t.Errorf("ListScopes() = %+v, want it to hold %+v", list, s)
			}
			if u, err := b.Usage(ctx, s); err != nil || u.Tasks < 1 {
				t.Errorf("Usage() = %+v, %v, want at least 1 task", u, err)
			}
			if err := b.RemoveScope(ctx, s); !errors.Is(err, cgroup.ErrBusy) {
				t.Errorf("RemoveScope(populated) = %v, want %v", err, cgroup.ErrBusy)
			}
			if state := unitState(t, b, s.Name); state != "active" {
				t.Errorf("unit %s is %q after a refused RemoveScope, want active", s.Name, state)
			}
			if _, _, err := b.CreateScope(ctx, profile, id, c.PID(), cgroup.Limits{}); !errors.Is(err, cgroup.ErrExists) {
				t.Errorf("CreateScope(same id) = %v, want %v", err, cgroup.ErrExists)
			}
			events.waitFor(t, s.Name, cgroup.ScopeCreated, cgroup.ScopePopulated)

			// The child exits: the manager stops the empty scope and
			// unloads it.
			c.Say(t, "done")
			if err := c.Wait(t); err != nil {
				t.Fatalf("child: %v", err)
			}
			events.waitFor(t, s.Name, cgroup.ScopeEmptied, cgroup.ScopeRemoved)
			if got := events.types(s.Name); !slices.Equal(got, lifecycle) {
				t.Errorf("Watch reported %v for %s, want %v", got, s.Name, lifecycle)
			}
			for _, ev := range events.of(s.Name) {
				if ev.Scope.Path != s.Path || ev.Scope.Profile != profile || ev.Scope.ID != id {
					t.Errorf("%v event for scope %+v, want path %s", ev.Type, ev.Scope, s.Path)
				}
				if wantPop := ev.Type == cgroup.ScopeCreated || ev.Type == cgroup.ScopePopulated; ev.Scope.Populated != wantPop {
					t.Errorf("%v event has Populated %v, want %v", ev.Type, ev.Scope.Populated, wantPop)
				}
			}

			if _, err := b.getUnit(ctx, s.Name); !errors.Is(err, cgroup.ErrNotFound) {
				t.Errorf("unit %s after its process exited: %v, want not found", s.Name, err)
			}
			if list, err := b.ListScopes(ctx); err != nil || slices.ContainsFunc(list, func(x cgroup.Scope) bool { return x.Name == s.Name }) {
				t.Errorf("ListScopes() after exit = %+v, %v, want no %s", list, err, s.Name)
			}
			if _, err := b.ScopeLimits(ctx, s); !errors.Is(err, cgroup.ErrNotFound) {
				t.Errorf("ScopeLimits(gone) = %v, want %v", err, cgroup.ErrNotFound)
			}
			if _, err := b.Usage(ctx, s); !errors.Is(err, cgroup.ErrNotFound) {
				t.Errorf("Usage(gone) = %v, want %v", err, cgroup.ErrNotFound)
			}
			if err := b.RemoveScope(ctx, s); err != nil {
				t.Errorf("RemoveScope(gone) = %v, want nil", err)
			}
			if err := b.Kill(ctx, s); err != nil {
				t.Errorf("Kill(gone) = %v, want nil", err)
			}
		})
	}
}

func TestCreateScopeRefusesAndLeavesNothing(t *testing.T) {
	m := requireManager(t)
	b := newBackend(t, Bus{Address: m.BusAddress}, Options{})
	c := startChild(t, "read line")
	tests := []struct {
		name    string
		profile string
		id      string
		pid     int
		limits  cgroup.Limits
		want    error // nil: any error
	}{
		{name: "no_such_process", profile: "coder", id: scope.NewID(), pid: pidMax(t) + 1, want: cgroup.ErrNoProcess},
		{name: "zero_pid", profile: "coder", id: scope.NewID(), pid: 0, want: cgroup.ErrNoProcess},
		{name: "invalid_profile", profile: "Coder_1", id: scope.NewID(), pid: c.PID()},
		{name: "invalid_id", profile: "coder", id: "0123", pid: c.PID()},
		{name: "negative_limit", profile: "coder", id: scope.NewID(), pid: c.PID(), limits: cgroup.Limits{Tasks: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := b.CreateScope(t.Context(), tc.profile, tc.id, tc.pid, tc.limits)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CreateScope() = %v, want %v", err, tc.want)
			}
			name := scope.ScopeName(tc.profile, tc.id)
			if _, err := b.getUnit(t.Context(), name); !errors.Is(err, cgroup.ErrNotFound) {
				t.Errorf("unit %s after a refused CreateScope: %v, want not found", name, err)
			}
		})
	}
	if got := cgroup2Of(t, c.PID()); strings.Contains(got, "marshal-") {
		t.Errorf("child moved to %s by refused creations", got)
	}
}

func TestKill(t *testing.T) {
	m := requireManager(t)
	mounts, err := cgroup.ReadMounts()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mounts cgroup.Mounts
	}{
		// Through cgroup2's cgroup.kill.
		{name: "cgroup_kill", mounts: mounts},
		// Without a cgroup2 mount to write to, through the manager.
		{name: "manager_kill", mounts: cgroup.Mounts{V1: mounts.V1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, Bus{Address: m.BusAddress}, Options{Mounts: tc.mounts})
			events := startWatch(t, b)
			ctx := t.Context()
			// The child forks only once it is in the scope, so its whole
			// tree is there.
			c := startChild(t, "read line; sleep 1000 & echo forked; exec sleep 1000")
			s, _, err := b.CreateScope(ctx, "killed", scope.NewID(), c.PID(), cgroup.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			c.Say(t, "fork")
			if got := c.Line(t); got != "forked" {
				t.Fatalf("child said %q, want forked", got)
			}
			procs, err := os.ReadFile(filepath.Join(mounts.V2, s.Path, cgroup.FileProcs))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(strings.Fields(string(procs))); n != 2 {
				t.Fatalf("scope holds %d processes (%q), want 2", n, procs)
			}

			// The watch must know the scope populated before it ends, or
			// its emptying is not news.
			events.waitFor(t, s.Name, cgroup.ScopePopulated)
			if err := b.Kill(ctx, s); err != nil {
				t.Fatalf("Kill() = %v", err)
			}
			events.waitFor(t, s.Name, cgroup.ScopeEmptied, cgroup.ScopeRemoved)
			if err := c.Wait(t); !testutil.KilledBy(err, syscall.SIGKILL) {
				t.Errorf("child ended with %v, want killed by SIGKILL", err)
			}
			if err := b.Kill(ctx, s); err != nil {
				t.Errorf("Kill(gone) = %v, want nil", err)
			}
		})
	}
}

func TestSliceLimitsAreReadBackNotTrusted(t *testing.T) {
	m := requireManager(t)
	b := newBackend(t, Bus{Address: m.BusAddress}, Options{})
	ctx := t.Context()
	const profile = "limited"
	name := scope.SliceName(profile)
	rel := path.Join(m.Cgroup, "marshal.slice", name)
	want := cgroup.Limits{CPUMilli: 500, MemoryBytes: 256 << 20, Tasks: 100}

	a, err := b.EnsureSlice(ctx, profile, want)
	if err != nil {
		t.Fatalf("EnsureSlice() = %v", err)
	}
	// systemd took every property...
	if got := heldLimits(t, b, name); got != want {
		t.Fatalf("systemd holds %+v for %s, want %+v", got, name, want)
	}
	// ...but the result says what the kernel holds: for each resource,
	// the limit file of the slice's group in cgroup2 or in the
	// controller's v1 hierarchy, and no limit where neither exists.
	checkAppliedMatchesKernel(t, b.mounts, rel, a, want)
	if kernelLimitFiles(b.mounts, rel) == 0 && a.Satisfies(want) {
		t.Errorf("EnsureSlice() = %+v satisfies %+v although no limit file exists", a, want)
	}

	// Only what differs is written. systemd records each property set on
	// a transient unit as a drop-in file named after the property.
	dropins := filepath.Join(m.RuntimeDir, "systemd", "transient", name+".d")
	before := files(t, dropins)
	again, err := b.EnsureSlice(ctx, profile, want)
	if err != nil {
		t.Fatal(err)
	}
	if !equalApplied(again, a) {
		t.Errorf("second EnsureSlice() = %+v, want %+v", again, a)
	}
	if got := changedFiles(before, files(t, dropins)); len(got) != 0 {
		t.Errorf("EnsureSlice(same limits) wrote %v, want nothing", got)
	}
	fewer := want
	fewer.Tasks = 50
	if _, err := b.EnsureSlice(ctx, profile, fewer); err != nil {
		t.Fatal(err)
	}
	if got, wantFiles := changedFiles(before, files(t, dropins)), []string{"50-TasksMax.conf"}; !slices.Equal(got, wantFiles) {
		t.Errorf("EnsureSlice(tasks changed) wrote %v, want %v", got, wantFiles)
	}
	if got := heldLimits(t, b, name); got != fewer {
		t.Errorf("systemd holds %+v after EnsureSlice(%+v)", got, fewer)
	}
	if _, err := b.EnsureSlice(ctx, profile, cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := heldLimits(t, b, name); got != (cgroup.Limits{}) {
		t.Errorf("systemd holds %+v after EnsureSlice(no limits)", got)
	}

	// A slice with a live scope is not stopped.
	c := startChild(t, "read line")
	s, _, err := b.CreateScope(ctx, profile, scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveSlice(ctx, profile); !errors.Is(err, cgroup.ErrBusy) {
		t.Fatalf("RemoveSlice(with a scope) = %v, want %v", err, cgroup.ErrBusy)
	}
	if state := unitState(t, b, s.Name); state != "active" {
		t.Fatalf("scope %s is %q after a refused RemoveSlice, want active", s.Name, state)
	}
	events := startWatch(t, b)
	// The watch must know the scope before it ends, or its end is not news.
	events.waitFor(t, s.Name, cgroup.ScopePopulated)
	c.Say(t, "done")
	if err := c.Wait(t); err != nil {
		t.Fatal(err)
	}
	events.waitFor(t, s.Name, cgroup.ScopeRemoved)

	if err := b.RemoveSlice(ctx, profile); err != nil {
		t.Fatalf("RemoveSlice() = %v", err)
	}
	if _, err := b.getUnit(ctx, name); !errors.Is(err, cgroup.ErrNotFound) {
		t.Errorf("slice %s after RemoveSlice: %v, want not found", name, err)
	}
	if _, err := os.Stat(filepath.Join(b.mounts.V2, rel)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slice cgroup after RemoveSlice: %v, want not exist", err)
	}
	if err := b.RemoveSlice(ctx, profile); err != nil {
		t.Errorf("RemoveSlice(gone) = %v, want nil", err)
	}
}

func TestProbeReportsWhatTheManagerControls(t *testing.T) {
	m := requireManager(t)
	b := newBackend(t, Bus{Address: m.BusAddress}, Options{})
	caps, err := b.Probe(t.Context())
	if err != nil {
		t.Fatalf("Probe() = %v", err)
	}
	// The manager can enforce a limit through cgroup2 only with a
	// controller its own group may enable; a user manager never drives v1
	// controllers.
	avail, err := cgroup.ReadFile(filepath.Join(b.mounts.V2, m.Cgroup), cgroup.FileControllers)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cgroup.AllResources {
		want := cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}
		switch {
		case slices.Contains(strings.Fields(avail), cgroup.Controller(r)):
			want = cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV2, Controller: cgroup.LimitFile(r, cgroup.MethodCgroupV2)}
		case r == cgroup.CPU:
			want = cgroup.Enforcement{Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS}
		}
		if want.Level != v1alpha1.LevelKernel {
			want.Reason = notApplied(r)
		}
		if caps[r] != want {
			t.Errorf("Probe()[%s] = %+v, want %+v (manager's controllers: %q)", r, caps[r], want, avail)
		}
	}
	// The scratch slice is gone, unit and group.
	units, err := b.conn.ListUnitsByPatternsContext(t.Context(), nil, []string{"marshal-_probe_*"})
	if err != nil || len(units) != 0 {
		t.Errorf("probe units after Probe: %+v, %v, want none", units, err)
	}
	entries, _ := os.ReadDir(filepath.Join(b.mounts.V2, m.Cgroup, "marshal.slice"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "marshal-_probe_") {
			t.Errorf("probe group %s left behind", e.Name())
		}
	}
}

func TestWatchRelistsScopesThatExistBefore(t *testing.T) {
	m := requireManager(t)
	b := newBackend(t, Bus{Address: "unix:path=" + m.PrivateSocket, Direct: true}, Options{})
	c := startChild(t, "read line")
	s, _, err := b.CreateScope(t.Context(), "early", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	events := startWatch(t, b)
	events.waitFor(t, s.Name, cgroup.ScopeCreated, cgroup.ScopePopulated)
	for _, ev := range events.of(s.Name) {
		if !ev.Resync || ev.Scope != s {
			t.Errorf("relisted %v event = %+v, want Resync and scope %+v", ev.Type, ev, s)
		}
	}
	c.Say(t, "done")
	events.waitFor(t, s.Name, cgroup.ScopeEmptied, cgroup.ScopeRemoved)
	if got := events.types(s.Name); !slices.Equal(got, lifecycle) {
		t.Errorf("Watch reported %v, want %v", got, lifecycle)
	}
}

func TestWatchEndsWhenItsConnectionCloses(t *testing.T) {
	m := requireManager(t)
	bus := Bus{Address: m.BusAddress}
	conns := make(chan *dbus.Conn, 3)
	b := newBackend(t, bus, Options{Dial: func(ctx context.Context) (*dbus.Conn, error) {
		c, err := bus.Dial(ctx)
		if err == nil {
			conns <- c
		}
		return c, err
	}})
	<-conns // New's two
	<-conns
	c := startChild(t, "read line")
	s, _, err := b.CreateScope(t.Context(), "cut", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l := &eventLog{wake: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- b.Watch(t.Context(), l.add) }()
	watchConn := <-conns
	// Once the relist reported the scope, Watch is waiting on signals.
	l.waitFor(t, s.Name, cgroup.ScopeCreated, cgroup.ScopePopulated)
	watchConn.Close()
	if err := <-done; !errors.Is(err, ErrDisconnected) {
		t.Fatalf("Watch() after its connection closed = %v, want %v", err, ErrDisconnected)
	}
}

func TestNewFindsTheManagerFromTheEnvironment(t *testing.T) {
	m := requireManager(t)
	tests := []struct {
		name       string
		busAddress string
	}{
		{name: "session_bus_address", busAddress: m.BusAddress},
		{name: "runtime_dir_private_socket", busAddress: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_RUNTIME_DIR", m.RuntimeDir)
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", tc.busAddress)
			b, err := New(t.Context(), Options{User: true})
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			defer b.Close()
			if b.Root() != m.Cgroup || b.Name() != "systemd" {
				t.Errorf("New() = backend %q at %q, want systemd at %q", b.Name(), b.Root(), m.Cgroup)
			}
			if _, err := b.ListScopes(t.Context()); err != nil {
				t.Errorf("ListScopes() = %v", err)
			}
		})
	}
}

func TestNewUnavailable(t *testing.T) {
	dir := t.TempDir()
	notManager := listenAndHangUp(t, filepath.Join(dir, "hangup"))
	tests := []struct {
		name string
		env  map[string]string
		dial DialFunc
		want error
	}{
		{
			name: "no_bus_in_environment",
			env:  map[string]string{"DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": dir},
			want: ErrNoBus,
		},
		{
			name: "nothing_listens",
			dial: Bus{Address: "unix:path=" + filepath.Join(dir, "none")}.Dial,
			want: cgroup.ErrUnavailable,
		},
		{
			name: "peer_is_not_a_manager",
			dial: Bus{Address: "unix:path=" + notManager}.Dial,
			want: cgroup.ErrUnavailable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			b, err := New(t.Context(), Options{User: true, Dial: tc.dial})
			if err == nil {
				b.Close()
				t.Fatal("New() = nil error")
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, cgroup.ErrUnavailable) {
				t.Errorf("New() = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewHonoursContext(t *testing.T) {
	m := requireManager(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := New(ctx, Options{Dial: Bus{Address: m.BusAddress}.Dial})
	if !errors.Is(err, context.Canceled) || errors.Is(err, cgroup.ErrUnavailable) {
		t.Fatalf("New(cancelled) = %v, want %v", err, context.Canceled)
	}
}

// listenAndHangUp listens on a unix socket at path and closes every
// connection at once: a peer that is not a D-Bus manager.
func listenAndHangUp(t *testing.T, path string) string {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return path
}

// unitState returns the ActiveState of unit name, "" when not loaded.
func unitState(t testing.TB, b *Backend, name string) string {
	t.Helper()
	p, err := b.getUnit(t.Context(), name)
	if errors.Is(err, cgroup.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var state string
	if err := b.getProperty(t.Context(), p, unitIface, "ActiveState", &state); err != nil {
		t.Fatal(err)
	}
	return state
}

// heldLimits returns the limits systemd holds for slice name.
func heldLimits(t testing.TB, b *Backend, name string) cgroup.Limits {
	t.Helper()
	props, err := b.conn.GetUnitTypePropertiesContext(t.Context(), name, "Slice")
	if err != nil {
		t.Fatal(err)
	}
	vs := map[string]dbus.Variant{}
	for k, v := range props {
		vs[k] = dbus.MakeVariant(v)
	}
	l, err := unitLimits(vs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// kernelLimitFiles counts the limit files the group at rel has, in
// cgroup2 and in each controller's v1 hierarchy.
func kernelLimitFiles(mounts cgroup.Mounts, rel string) int {
	n := 0
	for _, r := range cgroup.AllResources {
		for _, f := range limitFiles(mounts, rel, r) {
			if _, err := os.Stat(f.path); err == nil {
				n++
			}
		}
	}
	return n
}

type limitFile struct {
	path   string
	method cgroup.Method
}

func limitFiles(mounts cgroup.Mounts, rel string, r cgroup.Resource) []limitFile {
	files := []limitFile{{filepath.Join(mounts.V2, rel, cgroup.LimitFile(r, cgroup.MethodCgroupV2)), cgroup.MethodCgroupV2}}
	if mnt := mounts.V1[cgroup.Controller(r)]; mnt != "" {
		files = append(files, limitFile{filepath.Join(mnt, rel, cgroup.LimitFile(r, cgroup.MethodCgroupV1)), cgroup.MethodCgroupV1})
	}
	return files
}

// checkAppliedMatchesKernel checks a against the limit files of the group
// at rel: where a file exists the limit it holds is the one asked for and
// a reports it through that file's method; where none does, a reports no
// limit.
func checkAppliedMatchesKernel(t testing.TB, mounts cgroup.Mounts, rel string, a cgroup.Applied, asked cgroup.Limits) {
	t.Helper()
	for _, r := range cgroup.AllResources {
		var held *limitFile
		for _, f := range limitFiles(mounts, rel, r) {
			if _, err := os.Stat(f.path); err == nil {
				held = &f
				break
			}
		}
		e, enforced := a.Enforced[r]
		if held == nil {
			if a.Limits.Get(r) != 0 || enforced {
				t.Errorf("applied %s = %d (%+v), but no limit file exists for %s", r, a.Limits.Get(r), e, rel)
			}
			continue
		}
		if a.Limits.Get(r) != asked.Get(r) || !enforced || e.Method != held.method || e.Level != v1alpha1.LevelKernel {
			t.Errorf("applied %s = %d (%+v), want %d through %s", r, a.Limits.Get(r), e, asked.Get(r), held.path)
		}
	}
}

// files returns the modification time of every file in dir, none when dir
// does not exist.
func files(t testing.TB, dir string) map[string]time.Time {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.ModTime()
	}
	return out
}

// changedFiles returns, sorted, the files of after that are not in before
// or were modified since.
func changedFiles(before, after map[string]time.Time) []string {
	var out []string
	for name, mtime := range after {
		if old, ok := before[name]; !ok || !old.Equal(mtime) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func equalApplied(a, b cgroup.Applied) bool {
	if a.Limits != b.Limits || len(a.Enforced) != len(b.Enforced) {
		return false
	}
	for r, e := range a.Enforced {
		if b.Enforced[r] != e {
			return false
		}
	}
	return true
}

// cgroup2Of returns the cgroup2 path of process pid.
func cgroup2Of(t testing.TB, pid int) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("no cgroup2 line in /proc/%d/cgroup: %q", pid, data)
	return ""
}

// pidMax returns the largest pid the kernel hands out: pidMax()+1 is
// never a process.
func pidMax(t testing.TB) int {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A scope that ran and ended before the watch saw it run (its stop the
// first signal the watch reads of it) is reported created, empty and
// removed, so that what waits on its end (a launch's settling) hears of
// it; one the manager says stopped while its group holds processes is
// not.
func TestWatchReportsAScopeThatEndedUnseen(t *testing.T) {
	m := requireManager(t)
	b := newBackend(t, Bus{Address: "unix:path=" + m.PrivateSocket, Direct: true}, Options{})
	ctx := t.Context()
	if b.v2("") == "" {
		t.Skip("no cgroup2 mount: the watch goes by the unit state alone")
	}
	c := startChild(t, "read line")
	s, _, err := b.CreateScope(ctx, "brief", scope.NewID(), c.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	live := startChild(t, "read line")
	running, _, err := b.CreateScope(ctx, "brief", scope.NewID(), live.PID(), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c.Say(t, "done")
	if err := c.Wait(t); err != nil {
		t.Fatalf("child: %v", err)
	}
	// Empty, or removed by the manager already: either way ended.
	if _, err := cgroup.WaitEvents(ctx, b.v2(s.Path), func(ev cgroup.GroupEvents) bool { return !ev.Populated }); err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		t.Fatalf("waiting for %s to end: %v", s.Name, err)
	}

	l := &eventLog{wake: make(chan struct{}, 1)}
	w := &watcher{b: b, fn: l.add, known: map[string]*cgroup.Scope{}}
	for _, sc := range []cgroup.Scope{s, running} {
		id, _ := scope.ParseScopeName(sc.Name)
		w.changed(ctx, id, "inactive")
	}
	want := []cgroup.EventType{cgroup.ScopeCreated, cgroup.ScopeRemoved}
	if got := l.types(s.Name); !slices.Equal(got, want) {
		t.Fatalf("Watch reported %v for the scope that ended unseen, want %v", got, want)
	}
	for _, ev := range l.of(s.Name) {
		if ev.Scope.Path != s.Path || ev.Scope.Populated || ev.Scope.ID != s.ID {
			t.Errorf("%v event for scope %+v, want %s at %s, empty", ev.Type, ev.Scope, s.Name, s.Path)
		}
	}
	if got := l.types(running.Name); len(got) != 0 {
		t.Errorf("Watch reported %v for a scope said stopped that holds a process, want nothing", got)
	}
	live.Say(t, "done")
}
