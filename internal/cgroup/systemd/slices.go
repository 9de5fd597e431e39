package systemd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	sdbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// EnsureSlice starts the profile's slice as a transient unit when the
// manager has none, and makes the limits systemd holds for it equal
// limits (a zero field sets it back to infinity), setting only the
// properties that differ. It returns what reading the slice's cgroup back
// showed, which on a manager without the controllers is no limit at all.
func (b *Backend) EnsureSlice(ctx context.Context, profile string, limits cgroup.Limits) (cgroup.Applied, error) {
	if err := checkProfile(profile); err != nil {
		return cgroup.Applied{}, err
	}
	if err := checkLimits(limits); err != nil {
		return cgroup.Applied{}, err
	}
	name := scope.SliceName(profile)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ensureSlice(ctx, name, profile, limits); err != nil {
		return cgroup.Applied{}, fmt.Errorf("systemd: slice %s: %w", name, err)
	}
	rel, err := b.controlGroup(ctx, name, sliceIface)
	if err != nil {
		return cgroup.Applied{}, fmt.Errorf("systemd: slice %s: %w", name, err)
	}
	a, err := b.readApplied(rel)
	if err != nil {
		return cgroup.Applied{}, fmt.Errorf("systemd: slice %s: %w", name, err)
	}
	return a, nil
}

func (b *Backend) ensureSlice(ctx context.Context, name, profile string, limits cgroup.Limits) error {
	p, err := b.getUnit(ctx, name)
	if errors.Is(err, cgroup.ErrNotFound) {
		props := append(limitProperties(limits), description("profile "+profile))
		return runJob(ctx, "start", name, func(ch chan<- string) (int, error) {
			return b.conn.StartTransientUnitContext(ctx, name, "fail", props, ch)
		})
	}
	if err != nil {
		return err
	}
	// The slice is loaded: made by an earlier EnsureSlice, or implied by
	// a scope started in it.
	props, err := b.getProperties(ctx, p, sliceIface)
	if err != nil {
		return err
	}
	held, err := unitLimits(props)
	if err != nil {
		return err
	}
	var diff []sdbus.Property
	for _, r := range cgroup.AllResources {
		if held.Get(r) != limits.Get(r) {
			diff = append(diff, limitProperty(r, limits.Get(r)))
		}
	}
	if len(diff) > 0 {
		if err := b.conn.SetUnitPropertiesContext(ctx, name, true, diff...); err != nil {
			return fmt.Errorf("setting limits: %w", err)
		}
	}
	var state string
	if err := b.getProperty(ctx, p, unitIface, "ActiveState", &state); err != nil {
		return err
	}
	if activeState(state) {
		return nil
	}
	return runJob(ctx, "start", name, func(ch chan<- string) (int, error) {
		return b.conn.StartUnitContext(ctx, name, "fail", ch)
	})
}

// RemoveSlice stops the profile's slice unit. Stopping a slice stops
// every unit in it, killing their processes, so it first checks that the
// manager lists no scope of the profile and that the slice's cgroup holds
// no process, and returns an error wrapping cgroup.ErrBusy otherwise; it
// holds the backend's lock meanwhile, so this backend starts no scope in
// between. It returns nil when the manager has no such slice.
func (b *Backend) RemoveSlice(ctx context.Context, profile string) error {
	if err := checkProfile(profile); err != nil {
		return err
	}
	name := scope.SliceName(profile)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.getUnit(ctx, name); errors.Is(err, cgroup.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("systemd: removing slice %s: %w", name, err)
	}
	scopes, err := b.listScopeUnits(ctx)
	if err != nil {
		return fmt.Errorf("systemd: removing slice %s: %w", name, err)
	}
	for _, u := range scopes {
		if u.id.Profile == profile {
			return fmt.Errorf("systemd: removing slice %s: scope %s is %s: %w", name, u.id.Scope, u.state, cgroup.ErrBusy)
		}
	}
	rel, err := b.controlGroup(ctx, name, sliceIface)
	if err == nil {
		if pop, _, err := b.populated(rel); err == nil && pop {
			return fmt.Errorf("systemd: removing slice %s: its cgroup holds processes: %w", name, cgroup.ErrBusy)
		}
	}
	// "fail" refuses to cancel a start job queued for a unit in the slice.
	err = b.stopUnit(ctx, name, "fail")
	if isDBusError(err, errDestructive) {
		return fmt.Errorf("systemd: removing slice %s: %w: %w", name, err, cgroup.ErrBusy)
	}
	if err != nil {
		return fmt.Errorf("systemd: removing slice %s: %w", name, err)
	}
	return nil
}

// probeLimits are the limits Probe sets on its scratch slice: small
// enough to pass below any parent's limit in a v1 hierarchy, and exact
// (the memory value is page aligned) so that reading back must match.
var probeLimits = cgroup.Limits{
	CPUMilli:    10, // 1 ms per 100 ms period: the kernel's least quota
	MemoryBytes: 64 << 20,
	Tasks:       64,
}

// Probe reports, per resource, what this manager can enforce, by trying:
// it starts a scratch slice, marshal-_probe_<random>.slice (no profile
// name can produce it), with probeLimits, reads its cgroup back and stops
// it. A resource whose limit the kernel holds, exactly, is at kernel level
// through the method and file that hold it (cgroup_v2, or cgroup_v1 on a
// hybrid host where the manager drives the v1 controllers). Otherwise cpu
// is cooperative (qos_and_priority: scheduling priority needs no
// controller) and memory and pids are accounted. A user manager on a
// hybrid host gets no controller and so reports nothing at kernel level.
func (b *Backend) Probe(ctx context.Context) (caps cgroup.Capabilities, err error) {
	var buf [8]byte
	rand.Read(buf[:])
	name := "marshal-_probe_" + hex.EncodeToString(buf[:]) + ".slice"
	props := append(limitProperties(probeLimits), description("capability probe"), collectAlways)
	err = runJob(ctx, "start", name, func(ch chan<- string) (int, error) {
		return b.conn.StartTransientUnitContext(ctx, name, "fail", props, ch)
	})
	defer func() {
		// The slice is stopped even when the probe failed half way.
		if serr := b.stopDetached(ctx, name); serr != nil {
			caps, err = nil, errors.Join(err, serr)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("systemd: probing with slice %s: %w", name, err)
	}
	rel, err := b.controlGroup(ctx, name, sliceIface)
	if err != nil {
		return nil, fmt.Errorf("systemd: probing with slice %s: %w", name, err)
	}
	a, err := b.readApplied(rel)
	if err != nil {
		return nil, fmt.Errorf("systemd: probing with slice %s: %w", name, err)
	}
	caps = cgroup.Capabilities{}
	for _, r := range cgroup.AllResources {
		if e, ok := a.Enforced[r]; ok && a.Limits.Get(r) == probeLimits.Get(r) {
			caps[r] = e
		} else {
			caps[r] = cgroup.BelowKernel(r, notApplied(r))
		}
	}
	return caps, nil
}

// notApplied says why r's probe limit did not show in the probe slice's
// cgroup: systemd accepts the property and drops it when the controller
// is not its to give.
func notApplied(r cgroup.Resource) string {
	return fmt.Sprintf("systemd took %s= for a probe slice but its cgroup does not hold it: the %s controller is not delegated to this manager (a user manager gets what user@.service's Delegate= gives; on a hybrid host the v1 controllers are not systemd's to delegate)",
		unitProperties.Get(r).setting, cgroup.Controller(r))
}
