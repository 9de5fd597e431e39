package cgroup

import (
	"context"
	"os"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Method is how a level is achieved for a resource, named as in the
// admission contract.
type Method string

// Methods, from firmest to softest.
const (
	MethodCgroupV2   Method = "cgroup_v2"        // a cgroup v2 controller
	MethodCgroupV1   Method = "cgroup_v1"        // a cgroup v1 controller (hybrid host)
	MethodQoS        Method = "qos_and_priority" // scheduling priority; cpu only
	MethodAccounting Method = "accounting"       // bookkeeping only
)

// Enforcement is the level at which a resource is held and how.
type Enforcement struct {
	Level  v1alpha1.Level `json:"level"`
	Method Method         `json:"method"`
	// Controller names the kernel controller file used, such as
	// "memory.max" or "memory.limit_in_bytes"; empty below kernel level.
	Controller string `json:"controller,omitempty"`
	// Reason says, below kernel level, why the kernel cannot hold the
	// resource's limits here when it has a controller for it, such as one
	// not delegated to marshal's tree.
	Reason string `json:"reason,omitempty"`
}

// Of returns e as the API reports it for resource r.
func (e Enforcement) Of(r Resource) v1alpha1.Enforcement {
	return v1alpha1.Enforcement{Resource: string(r), Level: e.Level, Method: string(e.Method), Controller: e.Controller, Reason: e.Reason}
}

// Capabilities is what a backend can enforce on this host, per resource.
type Capabilities map[Resource]Enforcement

// API lists caps as the API reports them, in the order of AllResources.
func (caps Capabilities) API() []v1alpha1.Enforcement {
	var out []v1alpha1.Enforcement
	for _, r := range AllResources {
		if e, ok := caps[r]; ok {
			out = append(out, e.Of(r))
		}
	}
	return out
}

// Limits are kernel limits for a slice or a scope. Zero means no limit.
type Limits struct {
	CPUMilli    int64 `json:"cpu_milli,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	Tasks       int64 `json:"tasks,omitempty"`
}

// Get returns the limit for r, zero when none.
func (l Limits) Get(r Resource) int64 { return l.perResource().Get(r) }

// Set sets the limit for r to v (zero: none).
func (l *Limits) Set(r Resource, v int64) {
	p := l.perResource()
	p.Set(r, v)
	*l = Limits{CPUMilli: p.CPU, MemoryBytes: p.Memory, Tasks: p.PIDs}
}

// perResource is l keyed by resource. Limits keeps its own fields, whose
// names its encoding (in journals and on the wire) has always had.
func (l Limits) perResource() PerResource[int64] {
	return PerResource[int64]{CPU: l.CPUMilli, Memory: l.MemoryBytes, PIDs: l.Tasks}
}

// Applied is what reading a group's limits back showed: the value in
// force for each resource (zero: none) and how it is enforced.
type Applied struct {
	Limits Limits `json:"limits"`
	// Enforced says, per resource that has a limit in force, the method
	// and controller that hold it.
	Enforced map[Resource]Enforcement `json:"enforced,omitempty"`
}

// Record notes that limit v of r, read back, is in force as e says; a
// zero v is no limit, and is not noted.
func (a *Applied) Record(r Resource, v int64, e Enforcement) {
	if v == 0 {
		return
	}
	if a.Enforced == nil {
		a.Enforced = map[Resource]Enforcement{}
	}
	a.Limits.Set(r, v)
	a.Enforced[r] = e
}

// Satisfies reports whether every limit in want is in force. Memory
// counts as in force when the kernel rounded it down to a whole page, as it
// does; every other limit must read back exactly.
func (a Applied) Satisfies(want Limits) bool {
	for _, r := range AllResources {
		w, got := want.Get(r), a.Limits.Get(r)
		switch {
		case w == 0 || got == w:
		case r == Memory && got < w && w-got < int64(os.Getpagesize()):
		default:
			return false
		}
	}
	return true
}

// Scope is a live marshal scope: one agent launch.
type Scope struct {
	// Name is the unit name, marshal-<esc(profile)>-<id>.scope.
	Name string `json:"name"`
	// Profile is the profile name, unescaped.
	Profile string `json:"profile"`
	// ID is the 32 lowercase hex digits of the launch.
	ID string `json:"id"`
	// Path is the scope's cgroup2 path relative to the cgroup2 mount,
	// starting with "/".
	Path string `json:"path"`
	// Populated reports whether any process is in the scope or below it,
	// as cgroup.events said when the scope was listed.
	Populated bool `json:"populated"`
}

// EventType is what happened to a scope.
type EventType int

// Scope events, in the order they happen to a scope.
const (
	ScopeCreated EventType = iota + 1
	ScopePopulated
	ScopeEmptied
	ScopeRemoved
)

func (t EventType) String() string {
	switch t {
	case ScopeCreated:
		return "created"
	case ScopePopulated:
		return "populated"
	case ScopeEmptied:
		return "emptied"
	case ScopeRemoved:
		return "removed"
	}
	return "unknown"
}

// Event says that something happened to a scope. Events are hints: the
// receiver re-reads the state it cares about. Resync, set after a relist or
// a lost-event recovery, means "any scope may have changed".
type Event struct {
	Type   EventType
	Scope  Scope
	Resync bool
}

// Backend creates, observes and removes marshal's slices and scopes.
//
// Every method that takes a profile expects a valid profile name
// (v1alpha1.ValidateName); every method that takes a Scope uses only its
// Name and Path. Methods are safe for concurrent use.
type Backend interface {
	// Name is "cgroupfs" or "systemd".
	Name() string

	// Probe reports what this backend can enforce on this host, per
	// resource.
	Probe(ctx context.Context) (Capabilities, error)

	// EnsureSlice creates the profile's slice when it is missing and makes
	// its limits equal limits (a zero field removes that limit). It
	// writes only what differs and returns what reading back showed.
	EnsureSlice(ctx context.Context, profile string, limits Limits) (Applied, error)

	// RemoveSlice removes the profile's slice. It returns ErrBusy when a
	// scope is still inside it, and nil when the slice does not exist.
	RemoveSlice(ctx context.Context, profile string) error

	// CreateScope creates the scope marshal-<profile>-<id>.scope inside
	// the profile's slice (creating the slice without limits if missing),
	// sets limits on it, and moves the existing process pid into it. It
	// returns ErrExists when the scope already exists, ErrNoProcess when
	// pid is gone. On error nothing is left behind.
	CreateScope(ctx context.Context, profile, id string, pid int, limits Limits) (Scope, Applied, error)

	// ScopeLimits reads back the limits in force on a scope. It returns
	// ErrNotFound when the scope does not exist.
	ScopeLimits(ctx context.Context, s Scope) (Applied, error)

	// ListScopes returns every marshal scope, sorted by Name.
	ListScopes(ctx context.Context) ([]Scope, error)

	// Watch calls fn for every scope event until ctx ends, then returns
	// ctx.Err() once no further call to fn can happen. fn is called from
	// one goroutine at a time and must not block for long. Watch is
	// event-driven; it never polls the tree on a timer.
	Watch(ctx context.Context, fn func(Event)) error

	// Usage reads what a scope uses. It returns ErrNotFound when the scope
	// does not exist.
	Usage(ctx context.Context, s Scope) (Usage, error)

	// Kill kills every process in the scope's tree. It returns once the
	// kill was delivered, not once the processes are gone; Watch reports
	// ScopeEmptied. It returns nil when the scope does not exist.
	Kill(ctx context.Context, s Scope) error

	// Terminate sends SIGTERM to every process in the scope's tree, asking
	// it to end, as Kill does SIGKILL; processes forked meanwhile get it
	// too. It returns once the signal was delivered. It returns nil when
	// the scope does not exist.
	Terminate(ctx context.Context, s Scope) error

	// RemoveScope removes an empty scope. It returns ErrBusy when the
	// scope is populated and nil when it does not exist.
	RemoveScope(ctx context.Context, s Scope) error
}
