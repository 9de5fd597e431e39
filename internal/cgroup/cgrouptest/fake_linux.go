package cgrouptest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// Op names a method of the Backend, for Fail and Calls.
type Op string

// The Backend's methods.
const (
	OpProbe       Op = "Probe"
	OpEnsureSlice Op = "EnsureSlice"
	OpRemoveSlice Op = "RemoveSlice"
	OpCreateScope Op = "CreateScope"
	OpScopeLimits Op = "ScopeLimits"
	OpListScopes  Op = "ListScopes"
	OpWatch       Op = "Watch"
	OpUsage       Op = "Usage"
	OpKill        Op = "Kill"
	OpTerminate   Op = "Terminate"
	OpRemoveScope Op = "RemoveScope"
)

// Options configure a Fake.
type Options struct {
	// NoController lists the resources the fake host has no controller
	// for: Probe reports them below kernel level, as cgroupfs does, and
	// no group has a limit file for them. Every other resource is held by
	// its cgroup v2 controller.
	NoController []cgroup.Resource
}

// Fake is a cgroup.Backend on a fake of the kernel's cgroup2 tree; see
// the package comment for what it models. Create it with New; its
// methods are safe for concurrent use.
type Fake struct {
	t     testing.TB
	mount string
	caps  cgroup.Capabilities

	// mu guards the fields that follow and the files below mount.
	mu       sync.Mutex
	groups   map[string]*group // by path relative to mount
	members  map[int]*member   // by pid
	watchers map[*watcher]struct{}
	faults   map[Op]fault
	calls    map[Op]int
	closed   bool
	ioErr    error // writing the model's files failed; reported when the test ends

	// waiters are the goroutines that wait for a member to exit.
	waiters sync.WaitGroup
}

var _ cgroup.Backend = (*Fake)(nil)

// group is a cgroup: a slice, a scope, or a group made with Mkdir.
type group struct {
	rel      string
	scope    *cgroup.Scope     // its identity, when it is a marshal scope
	members  map[int]*member   // processes directly in it
	live     int               // processes in it or below it
	children map[string]*group // groups directly below it, by rel
}

// scopeNow returns the identity of scope group g, populated as it is now.
func (g *group) scopeNow() cgroup.Scope {
	sc := *g.scope
	sc.Populated = g.live > 0
	return sc
}

// member is a process moved into a group, watched through its pidfd.
type member struct {
	pid   int
	pidfd *os.File // non-blocking, in the runtime's poller
	group *group
}

type fault struct {
	n   int
	err error
}

// New returns a Fake whose tree lives in a temporary directory of t. When
// t ends, the Fake stops watching its processes (it never kills them) and
// reports any error it met writing its files.
func New(t testing.TB, opts Options) *Fake {
	t.Helper()
	f := &Fake{
		t:        t,
		mount:    t.TempDir(),
		caps:     cgroup.Capabilities{},
		groups:   map[string]*group{},
		members:  map[int]*member{},
		watchers: map[*watcher]struct{}{},
		faults:   map[Op]fault{},
		calls:    map[Op]int{},
	}
	for _, r := range cgroup.AllResources {
		if slices.Contains(opts.NoController, r) {
			f.caps[r] = cgroup.BelowKernel(r, "")
		} else {
			f.caps[r] = cgroup.KernelEnforcement(r, cgroup.MethodCgroupV2)
		}
	}
	t.Cleanup(f.close)
	return f
}

// close stops the exit waiters and reports what went wrong on disk.
func (f *Fake) close() {
	f.mu.Lock()
	f.closed = true
	for _, m := range f.members {
		m.pidfd.Close() // ends its waiter's read
	}
	err := f.ioErr
	f.mu.Unlock()
	f.waiters.Wait()
	if err != nil {
		f.t.Errorf("cgrouptest: keeping the fake tree's files: %v", err)
	}
}

// Mount is the directory that stands for the cgroup2 mount: every
// Scope.Path is relative to it.
func (f *Fake) Mount() string { return f.mount }

// Fail makes the next n calls of op return err and change nothing;
// n = 0 clears the fault.
func (f *Fake) Fail(op Op, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[op] = fault{n: n, err: err}
}

// Calls reports how many times op was called, failed calls included.
func (f *Fake) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Mkdir creates the empty group rel (a clean absolute path relative to
// Mount) and any missing parent, as mkdir on a cgroup2 mount does: what a
// launch makes before it moves its process in. It returns an error
// wrapping cgroup.ErrExists when the group exists.
func (f *Fake) Mkdir(rel string) error {
	if !path.IsAbs(rel) || path.Clean(rel) != rel || rel == "/" {
		return fmt.Errorf("cgrouptest: group %q: want a clean absolute path below the mount", rel)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups[rel] != nil {
		return fmt.Errorf("cgrouptest: group %s: %w", rel, cgroup.ErrExists)
	}
	_, err := f.mkdirLocked(rel)
	return err
}

// beginLocked counts a call of op and returns why it must not go on: the
// fault injected for it, ctx ended, or the test over.
func (f *Fake) beginLocked(ctx context.Context, op Op) error {
	f.calls[op]++
	if ft := f.faults[op]; ft.n > 0 {
		ft.n--
		f.faults[op] = ft
		return ft.err
	}
	if f.closed {
		return fmt.Errorf("cgrouptest: %s after the test ended", op)
	}
	return ctx.Err()
}

// Name returns "fake".
func (f *Fake) Name() string { return "fake" }

// Probe reports every resource at kernel level through cgroup v2, except
// those in Options.NoController.
func (f *Fake) Probe(ctx context.Context) (cgroup.Capabilities, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpProbe); err != nil {
		return nil, err
	}
	return maps.Clone(f.caps), nil
}

// EnsureSlice creates the profile's slice when missing and makes its
// limit files hold limits, writing only what differs, then reads them
// back.
func (f *Fake) EnsureSlice(ctx context.Context, profile string, limits cgroup.Limits) (cgroup.Applied, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpEnsureSlice); err != nil {
		return cgroup.Applied{}, err
	}
	if err := checkProfile(profile); err != nil {
		return cgroup.Applied{}, err
	}
	rel := sliceRel(profile)
	if f.groups[rel] == nil {
		if _, err := f.mkdirLocked(rel); err != nil {
			return cgroup.Applied{}, fmt.Errorf("creating slice of profile %q: %w", profile, err)
		}
	}
	applied, err := f.setLimitsLocked(rel, limits)
	if err != nil {
		return applied, fmt.Errorf("limits of profile %q: %w", profile, err)
	}
	return applied, nil
}

// RemoveSlice removes the profile's slice; a group below it makes it
// busy.
func (f *Fake) RemoveSlice(ctx context.Context, profile string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpRemoveSlice); err != nil {
		return err
	}
	if err := checkProfile(profile); err != nil {
		return err
	}
	g := f.groups[sliceRel(profile)]
	if g == nil {
		return nil
	}
	if len(g.children) > 0 || g.live > 0 {
		return fmt.Errorf("slice of profile %q: removing %s: %w", profile, g.rel, cgroup.ErrBusy)
	}
	return f.removeLocked(g)
}

// CreateScope creates the scope in the profile's slice (and the slice
// when missing), writes its limits, and moves pid in. On error it leaves
// no scope behind.
func (f *Fake) CreateScope(ctx context.Context, profile, id string, pid int, limits cgroup.Limits) (cgroup.Scope, cgroup.Applied, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpCreateScope); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	sc, applied, err := f.createScopeLocked(profile, id, pid, limits)
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("creating scope %s: %w", scope.ScopeName(profile, id), err)
	}
	return sc, applied, nil
}

func (f *Fake) createScopeLocked(profile, id string, pid int, limits cgroup.Limits) (_ cgroup.Scope, _ cgroup.Applied, err error) {
	if err := checkProfile(profile); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	if !scope.ValidID(id) {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("launch id %q: want %d lowercase hex digits", id, scope.IDLength)
	}
	m := f.members[pid]
	if m != nil && m.exited() {
		f.dropLocked(m) // before its waiter did: the pid may be another process's now
		m = nil
	}
	if m == nil {
		if m, err = openMember(pid); err != nil {
			return cgroup.Scope{}, cgroup.Applied{}, err
		}
		defer func() {
			if err != nil {
				m.pidfd.Close()
			}
		}()
	}
	rel := scopeRel(profile, id)
	if f.groups[rel] != nil {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("%s: %w", rel, cgroup.ErrExists)
	}
	g, err := f.mkdirLocked(rel)
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	var applied cgroup.Applied
	if applied, err = f.setLimitsLocked(rel, limits); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, errors.Join(err, f.removeLocked(g))
	}
	if m.group == nil {
		f.members[pid] = m
		f.waiters.Add(1)
		go f.wait(m)
	}
	f.moveLocked(m, g)
	return g.scopeNow(), applied, nil
}

// ScopeLimits reads back the limit files of scope s.
func (f *Fake) ScopeLimits(ctx context.Context, s cgroup.Scope) (cgroup.Applied, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpScopeLimits); err != nil {
		return cgroup.Applied{}, err
	}
	g, err := f.scopeLocked(s)
	if err != nil {
		return cgroup.Applied{}, err
	}
	if g == nil {
		return cgroup.Applied{}, fmt.Errorf("scope %s: %w", s.Name, cgroup.ErrNotFound)
	}
	applied, err := f.readLimitsLocked(g.rel)
	if err != nil {
		return cgroup.Applied{}, fmt.Errorf("scope %s: %w", s.Name, err)
	}
	return applied, nil
}

// ListScopes returns every scope, sorted by Name.
func (f *Fake) ListScopes(ctx context.Context) ([]cgroup.Scope, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpListScopes); err != nil {
		return nil, err
	}
	return f.listLocked(), nil
}

func (f *Fake) listLocked() []cgroup.Scope {
	var out []cgroup.Scope
	for _, g := range f.groups {
		if g.scope != nil {
			out = append(out, g.scopeNow())
		}
	}
	slices.SortFunc(out, func(a, b cgroup.Scope) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Watch reports every existing scope (Resync set), then each scope event
// as the Fake makes it, until ctx ends.
func (f *Fake) Watch(ctx context.Context, fn func(cgroup.Event)) error {
	w := &watcher{wake: make(chan struct{}, 1)}
	f.mu.Lock()
	if err := f.beginLocked(ctx, OpWatch); err != nil {
		f.mu.Unlock()
		return err
	}
	for _, sc := range f.listLocked() {
		w.push(cgroup.Event{Type: cgroup.ScopeCreated, Scope: sc, Resync: true})
		if sc.Populated {
			w.push(cgroup.Event{Type: cgroup.ScopePopulated, Scope: sc, Resync: true})
		}
	}
	f.watchers[w] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, w)
		f.mu.Unlock()
	}()
	for {
		for _, ev := range w.take() {
			if err := ctx.Err(); err != nil {
				return err
			}
			fn(ev)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.wake:
		}
	}
}

// Usage reports the live processes in scope s as its tasks; CPU and
// memory are not accounted (zero).
func (f *Fake) Usage(ctx context.Context, s cgroup.Scope) (cgroup.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpUsage); err != nil {
		return cgroup.Usage{}, err
	}
	g, err := f.scopeLocked(s)
	if err != nil {
		return cgroup.Usage{}, err
	}
	if g == nil {
		return cgroup.Usage{}, fmt.Errorf("usage of scope %s: %w", s.Name, cgroup.ErrNotFound)
	}
	return cgroup.Usage{Tasks: int64(g.live)}, nil
}

// Kill sends SIGKILL to every process in scope s or below it; their
// exits empty it.
func (f *Fake) Kill(ctx context.Context, s cgroup.Scope) error {
	return f.signalScope(ctx, s, OpKill, unix.SIGKILL)
}

// Terminate sends SIGTERM to every process in scope s or below it.
func (f *Fake) Terminate(ctx context.Context, s cgroup.Scope) error {
	return f.signalScope(ctx, s, OpTerminate, unix.SIGTERM)
}

// signalScope sends sig to every process in scope s or below it.
func (f *Fake) signalScope(ctx context.Context, s cgroup.Scope, op Op, sig unix.Signal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, op); err != nil {
		return err
	}
	g, err := f.scopeLocked(s)
	if err != nil || g == nil {
		return err
	}
	var errs []error
	for _, m := range f.members {
		if m.group.rel != g.rel && !strings.HasPrefix(m.group.rel, g.rel+"/") {
			continue
		}
		if err := m.signal(sig); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("signalling pid %d: %w", m.pid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("signalling scope %s: %w", s.Name, err)
	}
	return nil
}

// RemoveScope removes scope s and the groups below it, unless a process
// is in any of them (ErrBusy).
func (f *Fake) RemoveScope(ctx context.Context, s cgroup.Scope) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(ctx, OpRemoveScope); err != nil {
		return err
	}
	g, err := f.scopeLocked(s)
	if err != nil || g == nil {
		return err
	}
	if g.live > 0 {
		return fmt.Errorf("removing scope %s: %s is populated: %w", s.Name, g.rel, cgroup.ErrBusy)
	}
	if err := f.removeLocked(g); err != nil {
		return fmt.Errorf("removing scope %s: %w", s.Name, err)
	}
	return nil
}

// scopeLocked returns the group of scope s, located by its Name, and nil
// when it does not exist.
func (f *Fake) scopeLocked(s cgroup.Scope) (*group, error) {
	id, ok := scope.ParseScopeName(s.Name)
	if !ok {
		return nil, fmt.Errorf("cgrouptest: %q is not a marshal scope name", s.Name)
	}
	rel := scopeRel(id.Profile, id.ID)
	if s.Path != "" && s.Path != rel {
		return nil, fmt.Errorf("cgrouptest: scope %s at %s is not in the fake tree, where it would be %s", s.Name, s.Path, rel)
	}
	return f.groups[rel], nil
}

// mkdirLocked creates group rel, and its missing parents, with the
// interface files the kernel would show in it. A new scope is reported
// created.
func (f *Fake) mkdirLocked(rel string) (*group, error) {
	var parent *group
	if dir := path.Dir(rel); dir != "/" {
		if parent = f.groups[dir]; parent == nil {
			var err error
			if parent, err = f.mkdirLocked(dir); err != nil {
				return nil, err
			}
		}
	}
	dir := f.dir(rel)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{cgroup.FileEvents: eventsContent(false), cgroup.FileProcs: ""}
	for _, r := range cgroup.AllResources {
		if f.caps[r].Level == v1alpha1.LevelKernel {
			files[cgroup.LimitFile(r, cgroup.MethodCgroupV2)] = noLimit(r)
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
	}
	g := &group{rel: rel, members: map[int]*member{}, children: map[string]*group{}}
	if id, ok := scope.Parse(rel); ok && rel == scopeRel(id.Profile, id.ID) {
		g.scope = &cgroup.Scope{Name: id.Scope, Profile: id.Profile, ID: id.ID, Path: rel}
	}
	f.groups[rel] = g
	if parent != nil {
		parent.children[rel] = g
	}
	if g.scope != nil {
		f.emitLocked(cgroup.ScopeCreated, g)
	}
	return g, nil
}

// removeLocked removes group g, empty, and every group below it, deepest
// first; each scope among them is reported removed.
func (f *Fake) removeLocked(g *group) error {
	for _, c := range g.children {
		if err := f.removeLocked(c); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(f.dir(g.rel)); err != nil {
		return err
	}
	delete(f.groups, g.rel)
	if parent := f.groups[path.Dir(g.rel)]; parent != nil {
		delete(parent.children, g.rel)
	}
	if g.scope != nil {
		f.emitLocked(cgroup.ScopeRemoved, g)
	}
	return nil
}

// setLimitsLocked makes the limit files of group rel hold limits,
// writing only what differs, and reads them back.
func (f *Fake) setLimitsLocked(rel string, limits cgroup.Limits) (cgroup.Applied, error) {
	applied := cgroup.Applied{Enforced: map[cgroup.Resource]cgroup.Enforcement{}}
	var errs []error
	for _, r := range cgroup.AllResources {
		if f.caps[r].Level != v1alpha1.LevelKernel {
			continue // no controller: Applied shows no limit
		}
		got, _, err := cgroup.SetLimit(cgroup.Host, f.dir(rel), r, cgroup.MethodCgroupV2, limits.Get(r))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.record(&applied, r, got)
	}
	return applied, errors.Join(errs...)
}

// readLimitsLocked reads back the limit files of group rel.
func (f *Fake) readLimitsLocked(rel string) (cgroup.Applied, error) {
	applied := cgroup.Applied{Enforced: map[cgroup.Resource]cgroup.Enforcement{}}
	for _, r := range cgroup.AllResources {
		if f.caps[r].Level != v1alpha1.LevelKernel {
			continue
		}
		v, err := cgroup.ReadLimit(f.dir(rel), r, cgroup.MethodCgroupV2)
		if err != nil {
			return cgroup.Applied{}, err
		}
		f.record(&applied, r, v)
	}
	return applied, nil
}

// record notes in a that limit v of r is in force.
func (f *Fake) record(a *cgroup.Applied, r cgroup.Resource, v int64) { a.Record(r, v, f.caps[r]) }

// moveLocked moves member m into group g, out of the group it was in.
func (f *Fake) moveLocked(m *member, g *group) {
	if from := m.group; from != nil {
		delete(from.members, m.pid)
		f.writeProcsLocked(from)
		f.addLiveLocked(from, -1)
	}
	m.group = g
	g.members[m.pid] = m
	f.writeProcsLocked(g)
	f.addLiveLocked(g, 1)
}

// addLiveLocked adds delta to the live processes of g and its ancestors;
// each group that became populated or empty shows it in cgroup.events,
// and each such scope is reported.
func (f *Fake) addLiveLocked(g *group, delta int) {
	for ; g != nil; g = f.groups[path.Dir(g.rel)] {
		was := g.live > 0
		g.live += delta
		if was == (g.live > 0) {
			continue
		}
		f.writeEventsLocked(g)
		if g.scope == nil {
			continue
		}
		if g.live > 0 {
			f.emitLocked(cgroup.ScopePopulated, g)
		} else {
			f.emitLocked(cgroup.ScopeEmptied, g)
		}
	}
}

// writeEventsLocked writes g's cgroup.events in place: the content keeps
// its length, so that a reader never sees it empty and an inotify watch
// on it sees IN_MODIFY, as on cgroup2.
func (f *Fake) writeEventsLocked(g *group) {
	file, err := os.OpenFile(filepath.Join(f.dir(g.rel), cgroup.FileEvents), os.O_WRONLY, 0)
	if err == nil {
		_, err = file.WriteAt([]byte(eventsContent(g.live > 0)), 0)
		err = errors.Join(err, file.Close())
	}
	f.ioErr = errors.Join(f.ioErr, err)
}

// writeProcsLocked writes the processes directly in g to its
// cgroup.procs.
func (f *Fake) writeProcsLocked(g *group) {
	var b strings.Builder
	for _, pid := range slices.Sorted(maps.Keys(g.members)) {
		b.WriteString(strconv.Itoa(pid) + "\n")
	}
	err := os.WriteFile(filepath.Join(f.dir(g.rel), cgroup.FileProcs), []byte(b.String()), 0o644)
	f.ioErr = errors.Join(f.ioErr, err)
}

// emitLocked reports event typ about scope group g to every watcher.
func (f *Fake) emitLocked(typ cgroup.EventType, g *group) {
	sc := g.scopeNow()
	for w := range f.watchers {
		w.push(cgroup.Event{Type: typ, Scope: sc})
	}
}

// wait waits for member m to exit, then takes it out of its group.
func (f *Fake) wait(m *member) {
	defer f.waiters.Done()
	err := m.waitExit()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed || f.members[m.pid] != m:
		// The test ended, or m was dropped already: its pidfd was closed.
	case err != nil:
		f.ioErr = errors.Join(f.ioErr, fmt.Errorf("waiting for pid %d to exit: %w", m.pid, err))
	default:
		f.dropLocked(m)
	}
}

// dropLocked takes member m, exited, out of its group.
func (f *Fake) dropLocked(m *member) {
	if f.members[m.pid] != m {
		return
	}
	delete(f.members, m.pid)
	delete(m.group.members, m.pid)
	f.writeProcsLocked(m.group)
	f.addLiveLocked(m.group, -1)
	m.pidfd.Close()
}

// openMember opens a pidfd for pid. A process that is gone is an error
// wrapping cgroup.ErrNoProcess.
func openMember(pid int) (*member, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, cgroup.ErrNoProcess)
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("moving pid %d: %w", pid, cgroup.ErrNoProcess)
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	// Non-blocking, the pidfd joins the runtime's poller: waitExit blocks
	// no thread, and Close ends it.
	return &member{pid: pid, pidfd: os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))}, nil
}

// waitExit blocks until the process exits (its pidfd becomes readable);
// closing the pidfd ends it with an error.
func (m *member) waitExit() error {
	rc, err := m.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd)) })
}

// exited reports whether the process has exited.
func (m *member) exited() bool {
	rc, err := m.pidfd.SyscallConn()
	if err != nil {
		return true
	}
	var done bool
	if err := rc.Control(func(fd uintptr) { done = pidfdReadable(int(fd)) }); err != nil {
		return true
	}
	return done
}

// pidfdReadable reports, without blocking, whether pidfd fd is readable:
// its process has exited.
func pidfdReadable(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(p, 0)
		if !errors.Is(err, unix.EINTR) {
			return n > 0
		}
	}
}

// signal sends sig to the process through its pidfd, which cannot reach
// another process that reused the pid.
func (m *member) signal(sig unix.Signal) error {
	rc, err := m.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	return serr
}

// watcher queues the events for one Watch; pushing never blocks the Fake.
type watcher struct {
	wake chan struct{}

	mu    sync.Mutex // guards queue
	queue []cgroup.Event
}

func (w *watcher) push(ev cgroup.Event) {
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) take() []cgroup.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q
}

func (f *Fake) dir(rel string) string { return filepath.Join(f.mount, rel) }

func sliceRel(profile string) string {
	return path.Join("/", scope.RootSlice, scope.SliceName(profile))
}

func scopeRel(profile, id string) string {
	return path.Join(sliceRel(profile), scope.ScopeName(profile, id))
}

func checkProfile(profile string) error {
	if msgs := v1alpha1.ValidateName(profile); len(msgs) > 0 {
		return fmt.Errorf("profile name %q: %s", profile, strings.Join(msgs, "; "))
	}
	return nil
}

// eventsContent is cgroup.events as the kernel shows it.
func eventsContent(populated bool) string {
	if populated {
		return "populated 1\nfrozen 0\n"
	}
	return "populated 0\nfrozen 0\n"
}

// noLimit is what r's cgroup v2 limit file holds in a new group.
func noLimit(r cgroup.Resource) string {
	if r == cgroup.CPU {
		return "max 100000"
	}
	return "max"
}
