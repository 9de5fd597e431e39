package systemd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// scopePattern matches the unit names of every marshal scope (and of
// nothing a profile slice is named).
const scopePattern = "marshal-*.scope"

// CreateScope starts the transient scope unit marshal-<profile>-<id>.scope
// in the profile's slice (systemd creates the slice, without limits, when
// missing) with process pid in it and limits as its properties, and waits
// for the start job. It returns the scope, with Path the unit's cgroup,
// and the limits read back from that cgroup.
//
// Errors: cgroup.ErrExists when the manager already has a unit of that
// name; cgroup.ErrNoProcess when pid is gone; a *JobError when the job
// did not finish "done". On any error, including ctx ending while the job
// runs, no scope is left: a scope that came up is stopped, which signals
// the process that was moved into it.
func (b *Backend) CreateScope(ctx context.Context, profile, id string, pid int, limits cgroup.Limits) (cgroup.Scope, cgroup.Applied, error) {
	if err := checkProfile(profile); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	if !scope.ValidID(id) {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("systemd: launch ID %q: want %d lowercase hex digits", id, scope.IDLength)
	}
	if pid <= 0 {
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("systemd: pid %d: %w", pid, cgroup.ErrNoProcess)
	}
	if err := checkLimits(limits); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, err
	}
	name := scope.ScopeName(profile, id)
	b.mu.RLock()
	defer b.mu.RUnlock()

	props := append([]sdbus.Property{
		description("launch " + id + " of profile " + profile),
		sdbus.PropSlice(scope.SliceName(profile)),
		sdbus.PropPids(uint32(pid)),
		collectAlways,
	}, limitProperties(limits)...)
	err := runJob(ctx, "start", name, func(ch chan<- string) (int, error) {
		return b.conn.StartTransientUnitContext(ctx, name, "fail", props, ch)
	})
	switch {
	case err == nil:
	case isDBusError(err, errUnitExists):
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("systemd: creating scope %s: %w", name, cgroup.ErrExists)
	case isDBusError(err, errUnknownPID):
		return cgroup.Scope{}, cgroup.Applied{}, fmt.Errorf("systemd: creating scope %s: pid %d: %w", name, pid, cgroup.ErrNoProcess)
	default:
		if _, ok := errors.AsType[*JobError](err); ok && !processExists(pid) {
			err = fmt.Errorf("%w: pid %d: %w", err, pid, cgroup.ErrNoProcess)
		}
		return cgroup.Scope{}, cgroup.Applied{}, b.undoCreate(ctx, name, fmt.Errorf("systemd: creating scope %s: %w", name, err))
	}

	s := cgroup.Scope{Name: name, Profile: profile, ID: id}
	if s.Path, err = b.controlGroup(ctx, name, scopeIface); err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, b.undoCreate(ctx, name, fmt.Errorf("systemd: created scope %s: %w", name, err))
	}
	s.Populated, _ = b.scopeState(s.Path, true)
	a, err := b.readApplied(s.Path)
	if err != nil {
		return cgroup.Scope{}, cgroup.Applied{}, b.undoCreate(ctx, name, fmt.Errorf("systemd: created scope %s: %w", name, err))
	}
	return s, a, nil
}

// undoCreate stops scope name, which a failed CreateScope may have left
// running, and returns err with whatever stopping it failed on.
func (b *Backend) undoCreate(ctx context.Context, name string, err error) error {
	if serr := b.stopDetached(ctx, name); serr != nil {
		return errors.Join(err, fmt.Errorf("undoing: %w", serr))
	}
	return err
}

// scopeRelOf returns where scope s lives, relative to each mount: s.Path
// when set, else the cgroup the manager gives its unit. It returns an
// error wrapping cgroup.ErrNotFound when s has no Path and the manager has
// no such running scope.
func (b *Backend) scopeRelOf(ctx context.Context, s cgroup.Scope) (string, error) {
	if _, ok := scope.ParseScopeName(s.Name); !ok {
		return "", fmt.Errorf("systemd: %q is not a marshal scope name", s.Name)
	}
	if s.Path == "" {
		return b.controlGroup(ctx, s.Name, scopeIface)
	}
	// The path is written to (cgroup.kill): it must be a clean path whose
	// last component is the scope's name.
	if !path.IsAbs(s.Path) || path.Clean(s.Path) != s.Path || path.Base(s.Path) != s.Name {
		return "", fmt.Errorf("systemd: scope %s: path %q does not end in its name", s.Name, s.Path)
	}
	return s.Path, nil
}

// ScopeLimits reads the limits in force on scope s back from its cgroup.
// It returns an error wrapping cgroup.ErrNotFound when the scope does not
// exist.
func (b *Backend) ScopeLimits(ctx context.Context, s cgroup.Scope) (cgroup.Applied, error) {
	rel, err := b.existingScope(ctx, s)
	if err != nil {
		return cgroup.Applied{}, err
	}
	a, err := b.readApplied(rel)
	if err != nil {
		return cgroup.Applied{}, fmt.Errorf("systemd: scope %s: %w", s.Name, err)
	}
	return a, nil
}

// Usage reads what scope s uses from its cgroup (see cgroup.ReadUsage). It
// returns an error wrapping cgroup.ErrNotFound when the scope does not
// exist.
func (b *Backend) Usage(ctx context.Context, s cgroup.Scope) (cgroup.Usage, error) {
	rel, err := b.existingScope(ctx, s)
	if err != nil {
		return cgroup.Usage{}, err
	}
	u, err := cgroup.ReadUsage(b.mounts, rel)
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("systemd: usage of scope %s: %w", s.Name, err)
	}
	return u, nil
}

// existingScope returns the cgroup of s, or an error wrapping
// cgroup.ErrNotFound when that group does not exist.
func (b *Backend) existingScope(ctx context.Context, s cgroup.Scope) (string, error) {
	rel, err := b.scopeRelOf(ctx, s)
	if err != nil {
		return "", fmt.Errorf("systemd: scope %s: %w", s.Name, err)
	}
	ok, err := b.groupExists(rel)
	if err != nil {
		return "", fmt.Errorf("systemd: scope %s: %w", s.Name, err)
	}
	if !ok {
		return "", fmt.Errorf("systemd: scope %s: no cgroup %s: %w", s.Name, rel, cgroup.ErrNotFound)
	}
	return rel, nil
}

// scopeUnit is a marshal scope the manager lists.
type scopeUnit struct {
	id    scope.Identity
	path  dbus.ObjectPath
	state string // ActiveState
}

// listScopeUnits returns the marshal scopes the manager has running (or
// starting, or stopping), sorted by name.
func (b *Backend) listScopeUnits(ctx context.Context) ([]scopeUnit, error) {
	units, err := b.conn.ListUnitsByPatternsContext(ctx, nil, []string{scopePattern})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", scopePattern, err)
	}
	var out []scopeUnit
	for _, u := range units {
		id, ok := scope.ParseScopeName(u.Name)
		if !ok || !activeState(u.ActiveState) {
			continue
		}
		out = append(out, scopeUnit{id: id, path: u.Path, state: u.ActiveState})
	}
	slices.SortFunc(out, func(a, b scopeUnit) int { return strings.Compare(a.id.Scope, b.id.Scope) })
	return out, nil
}

// ListScopes returns the marshal scopes the manager has running, sorted by
// Name, with Path the cgroup the manager gives each and Populated read
// from cgroup2's cgroup.events (on a host without cgroup2, taken as true
// for a running unit). A scope that goes away while listed is left out.
func (b *Backend) ListScopes(ctx context.Context) ([]cgroup.Scope, error) {
	units, err := b.listScopeUnits(ctx)
	if err != nil {
		return nil, fmt.Errorf("systemd: %w", err)
	}
	scopes := make([]cgroup.Scope, 0, len(units))
	for _, u := range units {
		var rel string
		err := b.getProperty(ctx, u.path, scopeIface, "ControlGroup", &rel)
		if errors.Is(err, cgroup.ErrNotFound) || err == nil && rel == "" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("systemd: listing scopes: %w", err)
		}
		pop, known, err := b.populated(rel)
		if errors.Is(err, cgroup.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("systemd: listing scopes: %w", err)
		}
		scopes = append(scopes, cgroup.Scope{
			Name:      u.id.Scope,
			Profile:   u.id.Profile,
			ID:        u.id.ID,
			Path:      rel,
			Populated: pop || !known,
		})
	}
	return scopes, nil
}

// Kill kills every process in scope s and below it: through cgroup2's
// cgroup.kill, which the kernel applies to the whole subtree at once,
// forks included; on a kernel or host without it, by asking the manager
// to send SIGKILL to every process of the unit. It returns nil when the
// scope does not exist.
func (b *Backend) Kill(ctx context.Context, s cgroup.Scope) error {
	rel, err := b.scopeRelOf(ctx, s)
	if errors.Is(err, cgroup.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("systemd: killing scope %s: %w", s.Name, err)
	}
	if dir := b.v2(rel); dir != "" {
		err := cgroup.KillGroup(cgroup.Host, dir)
		if err == nil || errors.Is(err, cgroup.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("systemd: killing scope %s: %w", s.Name, err)
		}
	}
	err = b.conn.KillUnitWithTarget(ctx, s.Name, sdbus.All, int32(syscall.SIGKILL))
	if err == nil || isDBusError(err, errNoSuchUnit) || isDBusError(err, errNoSuchProcess) {
		return nil
	}
	return fmt.Errorf("systemd: killing scope %s: %w", s.Name, err)
}

// Terminate sends SIGTERM to every process in scope s and below it: on
// the scope's cgroup2 group, frozen meanwhile (cgroup.SignalTree), else
// by asking the manager to signal every process of the unit. It returns
// nil when the scope does not exist.
func (b *Backend) Terminate(ctx context.Context, s cgroup.Scope) error {
	rel, err := b.scopeRelOf(ctx, s)
	if errors.Is(err, cgroup.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("systemd: terminating scope %s: %w", s.Name, err)
	}
	if dir := b.v2(rel); dir != "" {
		err := cgroup.SignalTree(ctx, cgroup.Host, dir, syscall.SIGTERM)
		if err == nil || errors.Is(err, cgroup.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("systemd: terminating scope %s: %w", s.Name, err)
		}
	}
	err = b.conn.KillUnitWithTarget(ctx, s.Name, sdbus.All, int32(syscall.SIGTERM))
	if err == nil || isDBusError(err, errNoSuchUnit) || isDBusError(err, errNoSuchProcess) {
		return nil
	}
	return fmt.Errorf("systemd: terminating scope %s: %w", s.Name, err)
}

// RemoveScope removes scope s once it is empty. systemd itself stops a
// scope and unloads it as soon as its cgroup empties, so RemoveScope
// mostly finds nothing and returns nil; a scope the manager still has
// although empty is stopped. A populated scope is left alone with an
// error wrapping cgroup.ErrBusy, since stopping it would kill its
// processes: Kill it first.
func (b *Backend) RemoveScope(ctx context.Context, s cgroup.Scope) error {
	if _, ok := scope.ParseScopeName(s.Name); !ok {
		return fmt.Errorf("systemd: %q is not a marshal scope name", s.Name)
	}
	p, err := b.getUnit(ctx, s.Name)
	if errors.Is(err, cgroup.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("systemd: removing scope %s: %w", s.Name, err)
	}
	var state string
	if err := b.getProperty(ctx, p, unitIface, "ActiveState", &state); errors.Is(err, cgroup.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("systemd: removing scope %s: %w", s.Name, err)
	}
	busy := activeState(state)
	if rel, err := b.scopeRelOf(ctx, s); err == nil {
		// The kernel's word beats the unit state, which lags it.
		if pop, known, err := b.populated(rel); known && err == nil {
			busy = pop
		} else if known && errors.Is(err, cgroup.ErrNotFound) {
			busy = false
		}
	}
	if busy {
		return fmt.Errorf("systemd: removing scope %s: it holds processes: %w", s.Name, cgroup.ErrBusy)
	}
	switch state {
	case "inactive":
		return nil
	case "failed":
		err = b.conn.ResetFailedUnitContext(ctx, s.Name)
		if isDBusError(err, errNoSuchUnit) {
			err = nil
		}
	default:
		err = b.stopUnit(ctx, s.Name, "fail")
	}
	if err != nil {
		return fmt.Errorf("systemd: removing scope %s: %w", s.Name, err)
	}
	return nil
}
