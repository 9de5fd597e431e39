package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// New returns a backend that keeps marshal's tree below opts.Root. It
// fails, wrapping cgroup.ErrUnavailable, when there is no cgroup2 mount,
// when the mount is not cgroup2 or is read-only, or when the group that
// would hold Root is not writable; the message names which.
func New(opts Options) (*Backend, error) {
	root, err := cleanRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	m := opts.Mounts
	if m.V2 == "" && len(m.V1) == 0 {
		if m, err = cgroup.ReadMounts(); err != nil {
			return nil, fmt.Errorf("cgroupfs: %w: %w", cgroup.ErrUnavailable, err)
		}
	}
	if m.V2 == "" {
		return nil, fmt.Errorf("cgroupfs: no cgroup2 mount: %w", cgroup.ErrUnavailable)
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = cgroup.Host
		if err := checkV2Mount(m.V2, filepath.Join(m.V2, root)); err != nil {
			return nil, err
		}
	}
	b := &Backend{
		fs:      fsys,
		mounts:  m,
		root:    root,
		tree:    path.Join(root, scope.RootSlice),
		methods: map[cgroup.Resource]cgroup.Method{},
	}
	// Which hierarchy carries a controller is fixed at mount time: a
	// controller bound to v1 is absent from cgroup2's root.
	v2, err := cgroup.ReadFile(m.V2, cgroup.FileControllers)
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: reading the cgroup2 root's controllers: %w", err)
	}
	for _, r := range cgroup.AllResources {
		ctrl := cgroup.Controller(r)
		switch {
		case slices.Contains(strings.Fields(v2), ctrl):
			b.methods[r] = cgroup.MethodCgroupV2
		case m.V1[ctrl] != "":
			b.methods[r] = cgroup.MethodCgroupV1
		}
	}
	return b, nil
}

// checkV2Mount checks that mount is a writable cgroup2 mount and that the
// nearest existing group on the way to dir may be written to.
func checkV2Mount(mount, dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return fmt.Errorf("cgroupfs: cgroup2 mount %s: %w: %w", mount, err, cgroup.ErrUnavailable)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("cgroupfs: %s is not a cgroup2 mount: %w", mount, cgroup.ErrUnavailable)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("cgroupfs: cgroup2 mount %s is read-only: %w", mount, cgroup.ErrUnavailable)
	}
	for {
		if _, err := os.Stat(dir); err == nil || dir == mount {
			break
		}
		dir = filepath.Dir(dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("cgroupfs: cannot create groups in %s: %w: %w", dir, err, cgroup.ErrUnavailable)
	}
	return nil
}

func checkProfile(profile string) error {
	if msgs := v1alpha1.ValidateName(profile); len(msgs) > 0 {
		return fmt.Errorf("profile name %q: %s", profile, strings.Join(msgs, "; "))
	}
	return nil
}

// v2 returns the absolute cgroup2 path of rel.
func (b *Backend) v2(rel string) string {
	return filepath.Join(b.mounts.V2, rel)
}

// v1 returns the absolute path of rel in the v1 hierarchy of r's
// controller, or "" when r is not limited through cgroup v1 here.
func (b *Backend) v1(r cgroup.Resource, rel string) string {
	if b.methods[r] != cgroup.MethodCgroupV1 {
		return ""
	}
	return filepath.Join(b.mounts.V1[cgroup.Controller(r)], rel)
}

// v1Dirs returns the absolute paths of rel in every v1 hierarchy that
// carries one of marshal's limits here, without duplicates (two
// controllers may share a hierarchy).
func (b *Backend) v1Dirs(rel string) []string {
	var dirs []string
	for _, r := range cgroup.AllResources {
		if d := b.v1(r, rel); d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// limitDir returns the group directory that holds r's limit for rel.
func (b *Backend) limitDir(r cgroup.Resource, rel string) string {
	switch b.methods[r] {
	case cgroup.MethodCgroupV2:
		return b.v2(rel)
	case cgroup.MethodCgroupV1:
		return b.v1(r, rel)
	}
	return ""
}

// scopeRelOf returns the path of s relative to each mount, checking that
// s names a marshal scope in this backend's tree. A Scope without Path is
// located by its Name.
func (b *Backend) scopeRelOf(s cgroup.Scope) (string, error) {
	id, ok := scope.ParseScopeName(s.Name)
	if !ok {
		return "", fmt.Errorf("cgroupfs: %q is not a marshal scope name", s.Name)
	}
	rel := b.scopeRel(id.Profile, id.ID)
	if s.Path != "" && s.Path != rel {
		return "", fmt.Errorf("cgroupfs: scope %s at %s is not in this backend's tree %s", s.Name, s.Path, b.tree)
	}
	return rel, nil
}

// EnsureSlice creates the profile's slice when missing and makes its
// limits equal limits, writing only what differs, then returns what
// reading back showed. A limit this host has no controller for is left
// out of the result, not reported as an error.
func (b *Backend) EnsureSlice(ctx context.Context, profile string, limits cgroup.Limits) (cgroup.Applied, error) {
	if err := checkProfile(profile); err != nil {
		return cgroup.Applied{}, err
	}
	if err := ctx.Err(); err != nil {
		return cgroup.Applied{}, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	rel := b.sliceRel(profile)
	// A slice whose scopes cannot get their controllers still takes its
	// own limits; the error says what its scopes lack.
	terr := b.ensureSlice(rel)
	if terr != nil && !errors.Is(terr, errNoDelegation) {
		return cgroup.Applied{}, fmt.Errorf("creating slice of profile %q: %w", profile, terr)
	}
	applied, err := b.applyLimits(rel, limits, false)
	if err = errors.Join(terr, err); err != nil {
		return applied, fmt.Errorf("limits of profile %q: %w", profile, err)
	}
	return applied, nil
}

// applyLimits makes the limits of group rel equal want and reads them
// back. A v1 group is created for a limit that needs one; a limit of zero
// needs nothing where there is no file to hold it. A fresh group, just
// created, holds no limit: only non-zero limits are written, without
// reading first.
func (b *Backend) applyLimits(rel string, want cgroup.Limits, fresh bool) (cgroup.Applied, error) {
	applied := cgroup.Applied{Enforced: map[cgroup.Resource]cgroup.Enforcement{}}
	var errs []error
	for _, r := range cgroup.AllResources {
		m, w := b.methods[r], want.Get(r)
		dir := b.limitDir(r, rel)
		if dir == "" || fresh && w == 0 {
			continue // no controller here (Applied shows it), or nothing to do
		}
		if w != 0 {
			if err := b.prepareLimit(r, rel); err != nil {
				errs = append(errs, err)
				continue
			}
		} else if _, err := os.Stat(filepath.Join(dir, cgroup.LimitFile(r, m))); err != nil {
			continue // nothing holds a limit there
		}
		var got int64
		var err error
		if fresh {
			got, err = cgroup.WriteLimit(b.fs, dir, r, m, w)
		} else {
			got, _, err = cgroup.SetLimit(b.fs, dir, r, m, w)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		applied.Record(r, got, cgroup.KernelEnforcement(r, m))
	}
	return applied, errors.Join(errs...)
}

// mkdirGroup creates group dir and reports whether it did. When dir's
// parent is missing it reports false. An existing dir is an error
// wrapping cgroup.ErrExists.
func (b *Backend) mkdirGroup(dir string) (bool, error) {
	err := b.fs.Mkdir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("%s: %w", dir, cgroup.ErrExists)
	}
	return err == nil, err
}

// prepareLimit makes the file for r's limit of group rel exist on v1,
// by creating the group in r's hierarchy. On v2 the file is there once
// the parent enables r's controller, which ensureSlice did.
func (b *Backend) prepareLimit(r cgroup.Resource, rel string) error {
	if b.methods[r] != cgroup.MethodCgroupV1 {
		return nil
	}
	if _, err := cgroup.MkdirAll(b.fs, b.v1(r, rel)); err != nil {
		return fmt.Errorf("creating %s group: %w", r, err)
	}
	return nil
}

// RemoveSlice removes the profile's slice from every hierarchy. It returns
// an error wrapping cgroup.ErrBusy while a scope is inside, and nil when
// the slice does not exist.
func (b *Backend) RemoveSlice(ctx context.Context, profile string) error {
	if err := checkProfile(profile); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rel := b.sliceRel(profile)
	if err := cgroup.RemoveGroup(b.fs, b.v2(rel)); err != nil {
		return fmt.Errorf("slice of profile %q: %w", profile, err)
	}
	var errs []error
	for _, dir := range b.v1Dirs(rel) {
		// With the cgroup2 slice gone no scope of the profile is alive; a
		// v1 scope group left here was orphaned by a crash mid-way.
		names, _ := os.ReadDir(dir)
		for _, e := range names {
			if id, ok := scope.ParseScopeName(e.Name()); ok && e.IsDir() && id.Profile == profile {
				errs = append(errs, cgroup.RemoveGroup(b.fs, filepath.Join(dir, e.Name())))
			}
		}
		errs = append(errs, cgroup.RemoveGroup(b.fs, dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("slice of profile %q: %w", profile, err)
	}
	return nil
}

// CreateScope creates marshal-<profile>-<id>.scope in the profile's slice,
// sets limits on it and moves pid into it: into the cgroup2 group, and
// into the same path of every v1 hierarchy where the scope or its slice
// carries a limit. The v1 moves come first, so that once the process shows
// in the cgroup2 scope every limit already holds it. On error it moves pid
// back where it was and removes the groups it created; the slice stays.
func (b *Backend) CreateScope(ctx context.Context, profile, id string, pid int, limits cgroup.Limits) (cgroup.Scope, cgroup.Applied, error) {
	s, applied, err := b.createScope(ctx, profile, id, pid, limits)
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("creating scope %s: %w", scope.ScopeName(profile, id), err)
	}
	return s, applied, nil
}

func (b *Backend) createScope(ctx context.Context, profile, id string, pid int, limits cgroup.Limits) (_ cgroup.Scope, _ cgroup.Applied, err error) {
	if err := checkProfile(profile); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	if !scope.ValidID(id) {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("launch id %q: want %d lowercase hex digits", id, scope.IDLength)
	}
	if pid <= 0 {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("pid %d: %w", pid, cgroup.ErrNoProcess)
	}
	if err := ctx.Err(); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	rel := b.scopeRel(profile, id)

	var (
		created []string    // groups made here, in order
		moved   []placement // where pid went, in order
	)
	defer func() {
		if err != nil {
			err = errors.Join(err, b.undoCreate(pid, moved, created))
		}
	}()
	if err := b.ensureSlice(path.Dir(rel)); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	v2dir := b.v2(rel)
	if _, err := b.mkdirGroup(v2dir); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	created = append(created, v2dir)
	// The scope joins a v1 hierarchy when it has a limit there or its
	// slice does (a slice's v1 group exists only for a limit). Only a v1
	// move needs a way back: the cgroup2 move comes last, and nothing
	// after it fails. So /proc/<pid>/cgroup is read at the first v1 group,
	// and a cgroup2-only launch never reads it.
	var (
		places []placement
		from   *procCgroup
	)
	for _, r := range cgroup.AllResources {
		dir := b.v1(r, rel)
		if dir == "" || slices.ContainsFunc(places, func(p placement) bool { return p.dir == dir }) {
			continue
		}
		if limits.Get(r) != 0 {
			if _, err := cgroup.MkdirAll(b.fs, filepath.Dir(dir)); err != nil {
				return cgroup.Scope{}, cgroup.Applied{}, err
			}
		}
		made, err := b.mkdirGroup(dir)
		if err != nil {
			return cgroup.Scope{}, cgroup.Applied{}, err
		}
		if !made {
			continue // no limit here, none on the slice
		}
		created = append(created, dir)
		if from == nil {
			pc, err := readProcCgroup(pid)
			if err != nil {
				return cgroup.Scope{}, cgroup.Applied{}, err
			}
			from = &pc
		}
		places = append(places, placement{dir: dir, back: from.v1Dir(b.mounts.V1, cgroup.Controller(r))})
	}
	places = append(places, placement{dir: v2dir})
	applied, err := b.applyLimits(rel, limits, true)
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	if err := ctx.Err(); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	for _, p := range places {
		if err := cgroup.MoveProcess(b.fs, p.dir, pid); err != nil {
			return cgroup.Scope{}, cgroup.Applied{}, err
		}
		moved = append(moved, p)
	}
	return cgroup.Scope{
		Name:      scope.ScopeName(profile, id),
		Profile:   profile,
		ID:        id,
		Path:      rel,
		Populated: true, // a live process was just moved in
	}, applied, nil
}

// placement is a group a process is moved into and the group it came
// from in the same hierarchy ("" when unknown or when the move needs no
// undoing).
type placement struct {
	dir, back string
}

// undoCreate moves pid back out of the groups in moved to where it came
// from, then removes the groups in created, last first.
func (b *Backend) undoCreate(pid int, moved []placement, created []string) error {
	var errs []error
	for _, p := range slices.Backward(moved) {
		if p.back == "" {
			continue
		}
		if err := cgroup.MoveProcess(b.fs, p.back, pid); err != nil && !errors.Is(err, cgroup.ErrNoProcess) {
			errs = append(errs, fmt.Errorf("undoing: %w", err))
		}
	}
	for _, dir := range slices.Backward(created) {
		if err := cgroup.RemoveGroup(b.fs, dir); err != nil {
			errs = append(errs, fmt.Errorf("undoing: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ScopeLimits reads back the limits in force on scope s. It returns an
// error wrapping cgroup.ErrNotFound when the scope does not exist.
func (b *Backend) ScopeLimits(ctx context.Context, s cgroup.Scope) (cgroup.Applied, error) {
	rel, err := b.scopeRelOf(s)
	if err != nil {
		return cgroup.Applied{}, err
	}
	if err := ctx.Err(); err != nil {
		return cgroup.Applied{}, err
	}
	if _, err := os.Stat(b.v2(rel)); err != nil {
		return cgroup.Applied{}, fmt.Errorf("scope %s: %w", s.Name, notFound(err))
	}
	applied := cgroup.Applied{Enforced: map[cgroup.Resource]cgroup.Enforcement{}}
	for _, r := range cgroup.AllResources {
		m, dir := b.methods[r], b.limitDir(r, rel)
		if dir == "" {
			continue
		}
		v, err := cgroup.ReadLimit(dir, r, m)
		if errors.Is(err, cgroup.ErrNotFound) {
			continue // no group or file there: no limit
		}
		if err != nil {
			return cgroup.Applied{}, fmt.Errorf("scope %s: %w", s.Name, err)
		}
		applied.Record(r, v, cgroup.KernelEnforcement(r, m))
	}
	return applied, nil
}

// ListScopes returns every marshal scope in the tree, sorted by Name.
func (b *Backend) ListScopes(ctx context.Context) ([]cgroup.Scope, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tree := b.v2(b.tree)
	sliceDirs, err := os.ReadDir(tree)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing scopes: %w", err)
	}
	var out []cgroup.Scope
	for _, sl := range sliceDirs {
		if !sl.IsDir() {
			continue
		}
		scopeDirs, err := os.ReadDir(filepath.Join(tree, sl.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since listed
		}
		if err != nil {
			return nil, fmt.Errorf("listing scopes: %w", err)
		}
		for _, sc := range scopeDirs {
			id, ok := scope.ParseScopeName(sc.Name())
			if !ok || !sc.IsDir() || scope.SliceName(id.Profile) != sl.Name() {
				continue
			}
			rel := path.Join(b.tree, sl.Name(), sc.Name())
			ev, err := cgroup.ReadEvents(b.v2(rel))
			if errors.Is(err, cgroup.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("listing scopes: %w", err)
			}
			out = append(out, cgroup.Scope{Name: sc.Name(), Profile: id.Profile, ID: id.ID, Path: rel, Populated: ev.Populated})
		}
	}
	slices.SortFunc(out, func(a, b cgroup.Scope) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Watch reports scope events of this backend's tree until ctx ends; see
// cgroup.WatchTree. It creates the tree when missing, so that it can be
// watched before the first slice exists.
func (b *Backend) Watch(ctx context.Context, fn func(cgroup.Event)) error {
	dir := b.v2(b.tree)
	if _, err := cgroup.MkdirAll(b.fs, dir); err != nil {
		return err
	}
	return cgroup.WatchTree(ctx, b.mounts.V2, dir, fn)
}

// Usage reads what scope s uses (see cgroup.ReadUsage). It returns an
// error wrapping cgroup.ErrNotFound when the scope does not exist.
func (b *Backend) Usage(ctx context.Context, s cgroup.Scope) (cgroup.Usage, error) {
	rel, err := b.scopeRelOf(s)
	if err != nil {
		return cgroup.Usage{}, err
	}
	if err := ctx.Err(); err != nil {
		return cgroup.Usage{}, err
	}
	u, err := cgroup.ReadUsage(b.mounts, rel)
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("usage of scope %s: %w", s.Name, err)
	}
	return u, nil
}

// RemoveScope removes scope s, and any empty group below it, from every
// hierarchy. It returns an error wrapping cgroup.ErrBusy while a process
// is in the scope, and nil when the scope does not exist.
func (b *Backend) RemoveScope(ctx context.Context, s cgroup.Scope) error {
	rel, err := b.scopeRelOf(s)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.removeEmptyTree(b.v2(rel)); err != nil {
		return fmt.Errorf("removing scope %s: %w", s.Name, err)
	}
	var errs []error
	for _, dir := range b.v1Dirs(rel) {
		errs = append(errs, cgroup.RemoveGroup(b.fs, dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing scope %s: %w", s.Name, err)
	}
	return nil
}

// removeEmptyTree removes v2 group dir and the groups below it, unless a
// process is in any of them (ErrBusy). A missing group is no error.
func (b *Backend) removeEmptyTree(dir string) error {
	err := cgroup.RemoveGroup(b.fs, dir)
	if !errors.Is(err, cgroup.ErrBusy) {
		return err // the common case: one rmdir
	}
	ev, err := cgroup.ReadEvents(dir)
	switch {
	case errors.Is(err, cgroup.ErrNotFound):
		return nil
	case err != nil:
		return err
	case ev.Populated:
		return fmt.Errorf("%s is populated: %w", dir, cgroup.ErrBusy)
	}
	// Empty, but with child groups: remove them deepest first.
	var groups []string
	if err := cgroup.WalkGroups(dir, func(g string) error {
		groups = append(groups, g)
		return nil
	}); err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		return err
	}
	for _, g := range slices.Backward(groups) {
		if err := cgroup.RemoveGroup(b.fs, g); err != nil {
			return err
		}
	}
	return nil
}

// Kill kills every process in scope s and below it with SIGKILL: through
// cgroup.kill where the kernel has it, else by freezing the scope,
// signalling each process and thawing it. It returns once the signals are
// delivered, and nil when the scope does not exist.
func (b *Backend) Kill(ctx context.Context, s cgroup.Scope) error {
	rel, err := b.scopeRelOf(s)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := b.v2(rel)
	err = cgroup.KillGroup(b.fs, dir)
	if errors.Is(err, errors.ErrUnsupported) {
		err = cgroup.SignalTree(ctx, b.fs, dir, unix.SIGKILL)
	}
	if err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		return fmt.Errorf("killing scope %s: %w", s.Name, err)
	}
	return nil
}

// Terminate sends SIGTERM to every process in scope s and below it, the
// tree frozen meanwhile so that none forks past it. It returns nil when
// the scope does not exist.
func (b *Backend) Terminate(ctx context.Context, s cgroup.Scope) error {
	rel, err := b.scopeRelOf(s)
	if err != nil {
		return err
	}
	if err := cgroup.SignalTree(ctx, b.fs, b.v2(rel), unix.SIGTERM); err != nil && !errors.Is(err, cgroup.ErrNotFound) {
		return fmt.Errorf("terminating scope %s: %w", s.Name, err)
	}
	return nil
}

// notFound turns fs.ErrNotExist into cgroup.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", cgroup.ErrNotFound, err)
	}
	return err
}
