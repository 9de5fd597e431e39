package systemd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// The manager's D-Bus names.
const (
	managerName  = "org.freedesktop.systemd1"
	managerPath  = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIface = "org.freedesktop.systemd1.Manager"
	unitIface    = "org.freedesktop.systemd1.Unit"
	sliceIface   = "org.freedesktop.systemd1.Slice"
	scopeIface   = "org.freedesktop.systemd1.Scope"
	unitPathNS   = dbus.ObjectPath("/org/freedesktop/systemd1/unit")
	propsIface   = "org.freedesktop.DBus.Properties"
)

// D-Bus errors the backend branches on.
const (
	errNoSuchUnit    = "org.freedesktop.systemd1.NoSuchUnit"
	errUnitExists    = "org.freedesktop.systemd1.UnitExists"
	errNoSuchProcess = "org.freedesktop.systemd1.NoSuchProcess"
	errDestructive   = "org.freedesktop.systemd1.TransactionIsDestructive"
	errUnknownPID    = "org.freedesktop.DBus.Error.UnixProcessIdUnknown"
	errUnknownObject = "org.freedesktop.DBus.Error.UnknownObject"
)

// infinity is what systemd's D-Bus API takes and shows for "no limit" in
// CPUQuotaPerSecUSec, MemoryMax and TasksMax.
const infinity = math.MaxUint64

// cleanupTimeout bounds the work that undoes a half-done change after the
// caller's context ended.
const cleanupTimeout = 5 * time.Second

// DialFunc opens a connection to a systemd manager: authenticated, and
// past Hello when it goes through a bus daemon. ctx bounds the dialing
// only; the connection must outlive it.
type DialFunc func(ctx context.Context) (*dbus.Conn, error)

// Options configure a Backend.
type Options struct {
	// User selects the calling user's manager instead of the system's.
	User bool
	// Dial, when set, replaces FindBus(User).Dial: tests point the backend
	// at a throwaway manager, or at a connection that fails on demand. It
	// is called for every connection the backend opens (two in New, one
	// per Watch).
	Dial DialFunc
	// Mounts is where the cgroup hierarchies are mounted, to read limits
	// and usage back. The zero value means cgroup.ReadMounts().
	Mounts cgroup.Mounts
}

// Backend is the systemd implementation of cgroup.Backend. Create it with
// New and Close it when done; its methods are safe for concurrent use.
type Backend struct {
	conn   *sdbus.Conn // jobs, kills, lists, property writes
	raw    *dbus.Conn  // one of conn's connections, for calls go-systemd lacks
	dial   DialFunc
	mounts cgroup.Mounts
	// root is the manager's own cgroup, relative to each mount: "/" for
	// the system manager, the user manager's group for a user manager. Its
	// units live below it.
	root string

	// mu orders slice changes against scope creation: EnsureSlice and
	// RemoveSlice hold it for writing, CreateScope for reading, so that a
	// slice is never stopped (which stops every unit in it) between the
	// check that it is empty and the stop.
	mu sync.RWMutex
}

var _ cgroup.Backend = (*Backend)(nil)

// New connects to the manager that opts selects and returns a backend
// that works through it. A manager that cannot be found, reached or asked
// is an error wrapping cgroup.ErrUnavailable (ErrNoBus when no socket was
// found); the message says which.
func New(ctx context.Context, opts Options) (*Backend, error) {
	dial := opts.Dial
	if dial == nil {
		bus, err := FindBus(opts.User)
		if err != nil {
			return nil, fmt.Errorf("systemd: %w", err)
		}
		dial = bus.Dial
	}
	mounts := opts.Mounts
	if mounts.V2 == "" && len(mounts.V1) == 0 {
		var err error
		if mounts, err = cgroup.ReadMounts(); err != nil {
			return nil, fmt.Errorf("systemd: %w", err)
		}
	}
	var raw *dbus.Conn
	conn, err := sdbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dial(ctx)
		if err == nil && raw == nil {
			raw = c
		}
		return c, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("systemd: connecting to the manager: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("systemd: connecting to the manager: %w: %w", err, cgroup.ErrUnavailable)
	}
	b := &Backend{conn: conn, raw: raw, dial: dial, mounts: mounts}
	var root string
	if err := b.getProperty(ctx, managerPath, managerIface, "ControlGroup", &root); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("systemd: asking the manager for its cgroup: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("systemd: asking the manager for its cgroup: %w: %w", err, cgroup.ErrUnavailable)
	}
	b.root = path.Join("/", root)
	return b, nil
}

// Name returns "systemd".
func (b *Backend) Name() string { return "systemd" }

// Close closes the backend's connections to the manager. Calls in flight
// fail; a running Watch has its own connection and ends with its context.
func (b *Backend) Close() error {
	b.conn.Close()
	return nil
}

// Root returns the manager's own cgroup, relative to each cgroup mount,
// below which it keeps its units ("/" for the system manager).
func (b *Backend) Root() string { return b.root }

// sliceRel returns the cgroup path of profile's slice, relative to each
// mount, as systemd lays it out: nested by the dashes of the unit name.
func (b *Backend) sliceRel(profile string) string {
	return path.Join(b.root, scope.RootSlice, scope.SliceName(profile))
}

// scopeRel returns the cgroup path of a scope, relative to each mount.
func (b *Backend) scopeRel(id scope.Identity) string {
	return path.Join(b.sliceRel(id.Profile), id.Scope)
}

// v2 returns the absolute cgroup2 directory of rel, "" without a cgroup2
// mount.
func (b *Backend) v2(rel string) string {
	if b.mounts.V2 == "" {
		return ""
	}
	return filepath.Join(b.mounts.V2, rel)
}

// v1 returns the absolute directory of rel in the v1 hierarchy of
// controller ctrl, "" when the host has none.
func (b *Backend) v1(ctrl, rel string) string {
	mnt := b.mounts.V1[ctrl]
	if mnt == "" {
		return ""
	}
	return filepath.Join(mnt, rel)
}

// getUnit returns the object path of a loaded unit. Unlike addressing the
// unit by its path, Manager.GetUnit never loads a unit: asking after a
// unit that is gone makes systemd load a stub and emit a spurious
// UnitNew/UnitRemoved pair. It returns an error wrapping
// cgroup.ErrNotFound when the unit is not loaded.
func (b *Backend) getUnit(ctx context.Context, name string) (dbus.ObjectPath, error) {
	var p dbus.ObjectPath
	err := b.raw.Object(managerName, managerPath).CallWithContext(ctx, managerIface+".GetUnit", 0, name).Store(&p)
	if isDBusError(err, errNoSuchUnit) {
		return "", fmt.Errorf("unit %s: %w", name, cgroup.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("unit %s: %w", name, err)
	}
	return p, nil
}

// getProperty stores property name of interface iface of object p in out.
func (b *Backend) getProperty(ctx context.Context, p dbus.ObjectPath, iface, name string, out any) error {
	var v dbus.Variant
	err := b.raw.Object(managerName, p).CallWithContext(ctx, propsIface+".Get", 0, iface, name).Store(&v)
	if err != nil {
		return fmt.Errorf("reading %s of %s: %w", name, p, unitGone(err))
	}
	if err := dbus.Store([]any{v.Value()}, out); err != nil {
		return fmt.Errorf("reading %s of %s: %w", name, p, err)
	}
	return nil
}

// getProperties returns every property of interface iface of object p.
func (b *Backend) getProperties(ctx context.Context, p dbus.ObjectPath, iface string) (map[string]dbus.Variant, error) {
	var props map[string]dbus.Variant
	err := b.raw.Object(managerName, p).CallWithContext(ctx, propsIface+".GetAll", 0, iface).Store(&props)
	if err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w", iface, p, unitGone(err))
	}
	return props, nil
}

// unitGone turns the errors of a unit that went away under a call into
// errors wrapping cgroup.ErrNotFound.
func unitGone(err error) error {
	if isDBusError(err, errNoSuchUnit) || isDBusError(err, errUnknownObject) {
		return fmt.Errorf("%w: %w", cgroup.ErrNotFound, err)
	}
	return err
}

// controlGroup returns the cgroup of a loaded unit of type iface (slice or
// scope), relative to each mount. It returns an error wrapping
// cgroup.ErrNotFound when the unit is not loaded or has no cgroup (it is
// not running).
func (b *Backend) controlGroup(ctx context.Context, name, iface string) (string, error) {
	p, err := b.getUnit(ctx, name)
	if err != nil {
		return "", err
	}
	var cg string
	if err := b.getProperty(ctx, p, iface, "ControlGroup", &cg); err != nil {
		return "", err
	}
	if cg == "" {
		return "", fmt.Errorf("unit %s has no cgroup: %w", name, cgroup.ErrNotFound)
	}
	return cg, nil
}

// runJob queues a job with start, which calls a go-systemd method that
// takes a result channel, and waits for the job's result or for ctx. It
// returns a *JobError unless the result is "done", and ctx's error when
// ctx ends first, in which case the job may still run.
func runJob(ctx context.Context, job, unit string, start func(chan<- string) (int, error)) error {
	// Buffered: go-systemd delivers the result while holding its lock,
	// and nobody may be reading any more.
	result := make(chan string, 1)
	if _, err := start(result); err != nil {
		return err
	}
	select {
	case r := <-result:
		if r != "done" {
			return &JobError{Unit: unit, Job: job, Result: r}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the %s job of %s: %w", job, unit, context.Cause(ctx))
	}
}

// stopUnit stops unit name and waits for the job. A unit that is not
// loaded is already stopped.
func (b *Backend) stopUnit(ctx context.Context, name, mode string) error {
	err := runJob(ctx, "stop", name, func(ch chan<- string) (int, error) {
		return b.conn.StopUnitContext(ctx, name, mode, ch)
	})
	if isDBusError(err, errNoSuchUnit) {
		return nil
	}
	return err
}

// stopDetached stops unit name after ctx ended or failed: it runs on a
// context of its own, bounded by cleanupTimeout.
func (b *Backend) stopDetached(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := b.stopUnit(ctx, name, "replace"); err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	return nil
}

// isDBusError reports whether err is, or wraps, the D-Bus error name.
func isDBusError(err error, name string) bool {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name == name
	}
	var pe *dbus.Error
	return errors.As(err, &pe) && pe.Name == name
}

// checkProfile returns an error unless profile is a valid profile name.
func checkProfile(profile string) error {
	if msgs := v1alpha1.ValidateName(profile); len(msgs) > 0 {
		return fmt.Errorf("systemd: profile name %q: %s", profile, strings.Join(msgs, "; "))
	}
	return nil
}

// checkLimits returns an error when a limit is negative.
func checkLimits(l cgroup.Limits) error {
	for _, r := range cgroup.AllResources {
		if l.Get(r) < 0 {
			return fmt.Errorf("systemd: %s limit %d: want 0 (none) or a positive value", r, l.Get(r))
		}
	}
	return nil
}

// unitProperty is the unit property that holds a resource's limit.
type unitProperty struct {
	// name is the D-Bus property; setting is the unit file setting a
	// person writes for it.
	name, setting string
	// scale is the property's units per unit of cgroup.Limits.
	scale uint64
}

// unitProperties holds each resource's unit property. CPU is
// CPUQuotaPerSecUSec, CPU time per second of wall time: one thousandth
// of a core is 1000 µs per second.
var unitProperties = cgroup.PerResource[unitProperty]{
	CPU:    unitProperty{name: "CPUQuotaPerSecUSec", setting: "CPUQuota", scale: 1000},
	Memory: unitProperty{name: "MemoryMax", setting: "MemoryMax", scale: 1},
	PIDs:   unitProperty{name: "TasksMax", setting: "TasksMax", scale: 1},
}

// limitProperty returns the unit property that sets r's limit to v (0: no
// limit).
func limitProperty(r cgroup.Resource, v int64) sdbus.Property {
	p := unitProperties.Get(r)
	u := uint64(infinity)
	if v > 0 {
		u = uint64(v) * p.scale
	}
	return sdbus.Property{Name: p.name, Value: dbus.MakeVariant(u)}
}

// limitProperties returns the properties that set the nonzero limits of l.
func limitProperties(l cgroup.Limits) []sdbus.Property {
	var props []sdbus.Property
	for _, r := range cgroup.AllResources {
		if v := l.Get(r); v > 0 {
			props = append(props, limitProperty(r, v))
		}
	}
	return props
}

// unitLimits reads the limits that systemd holds for a unit (what it was
// told, not what the kernel enforces) from its slice or scope properties.
func unitLimits(props map[string]dbus.Variant) (cgroup.Limits, error) {
	var l cgroup.Limits
	for _, r := range cgroup.AllResources {
		p := unitProperties.Get(r)
		v, ok := props[p.name].Value().(uint64)
		if !ok {
			return cgroup.Limits{}, fmt.Errorf("unit property %s is %v, want a uint64", p.name, props[p.name])
		}
		if v != infinity {
			l.Set(r, int64(min(v/p.scale, math.MaxInt64)))
		}
	}
	return l, nil
}

// activeState reports whether a unit in ActiveState s is running, or on
// its way into or out of running: the states in which a scope holds its
// processes.
func activeState(s string) bool {
	switch s {
	case "active", "reloading", "activating", "deactivating", "refreshing":
		return true
	}
	return false
}

// description is the Description= of the units marshal starts.
func description(what string) sdbus.Property {
	return sdbus.PropDescription("marshal " + what)
}

// collectAlways makes systemd unload a transient unit when it ends, failed
// or not, so that no failed unit stays behind to block its name.
var collectAlways = sdbus.Property{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")}
