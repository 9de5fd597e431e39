package admission

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// Phase is where an attempt is in its life.
type Phase string

// Phases, as DevGuard's AttemptPhase.
const (
	PhaseDenied          Phase = "denied"
	PhasePrepared        Phase = "prepared"
	PhaseLaunchCommitted Phase = "launch_committed"
	PhaseScopeBound      Phase = "scope_bound"
	PhaseRunAuthorized   Phase = "run_authorized"
	PhaseDraining        Phase = "draining"
	PhaseSuspect         Phase = "suspect"
	PhaseReleased        Phase = "released"
	PhaseCancelled       Phase = "cancelled"
	PhaseExpired         Phase = "expired"
)

// Phases lists every phase.
var Phases = []Phase{PhaseDenied, PhasePrepared, PhaseLaunchCommitted, PhaseScopeBound,
	PhaseRunAuthorized, PhaseDraining, PhaseSuspect, PhaseReleased, PhaseCancelled, PhaseExpired}

// Charged reports whether an attempt in p holds its reservation: prepared
// through suspect.
func (p Phase) Charged() bool {
	switch p {
	case PhasePrepared, PhaseLaunchCommitted, PhaseScopeBound, PhaseRunAuthorized, PhaseDraining, PhaseSuspect:
		return true
	}
	return false
}

// Terminal reports whether p is final: denied, released, cancelled or
// expired.
func (p Phase) Terminal() bool { return p.Valid() && !p.Charged() }

// Valid reports whether p is one of Phases.
func (p Phase) Valid() bool {
	switch p {
	case PhaseDenied, PhaseReleased, PhaseCancelled, PhaseExpired:
		return true
	}
	return p.Charged()
}

// Denial says why an attempt was denied.
type Denial string

const (
	// DenialResourceUnavailable: the request does not fit the target in
	// cpu, memory or tasks.
	DenialResourceUnavailable Denial = "resource_unavailable"
	// DenialPolicyUnsupported: a minimum level is above what this host's
	// plan gives.
	DenialPolicyUnsupported Denial = "resource_policy_unsupported"
)

// ReleaseReason says what evidence released an attempt.
type ReleaseReason string

const (
	// ReleaseScopeTerminated: the scope was seen unpopulated and its
	// launched process had exited.
	ReleaseScopeTerminated ReleaseReason = "scope_terminated"
	// ReleaseNoHelperCreated: the owner reported that no process was
	// created for the launch and none will be.
	ReleaseNoHelperCreated ReleaseReason = "no_helper_created"
	// ReleasePreviousBoot: the attempt belongs to an earlier boot, so
	// every process of it has ended.
	ReleasePreviousBoot ReleaseReason = "previous_boot"
)

// AbandonReason is why an owner abandons a committed launch that created
// nothing.
type AbandonReason string

const (
	// AbandonSpawnFailed: creating the scope or moving the process into
	// it failed, and nothing was left behind.
	AbandonSpawnFailed AbandonReason = "spawn_failed"
	// AbandonHelperExited: the process to be launched exited before it
	// was moved into a scope.
	AbandonHelperExited AbandonReason = "helper_exited"
	// AbandonGrantNotReceived: the answer carrying the permit never
	// arrived, so nothing was attempted.
	AbandonGrantNotReceived AbandonReason = "grant_not_received"
)

func (r AbandonReason) valid() bool {
	return r == AbandonSpawnFailed || r == AbandonHelperExited || r == AbandonGrantNotReceived
}

// MaxQuantity bounds every capacity, so that what charged attempts hold,
// each within the capacity it was admitted against, never overflows.
// A request may ask for any quantity: one above every capacity is denied.
const MaxQuantity = uint64(1) << 53

// Budget is an amount of each resource, as DevGuard's Budget: u64
// quantities.
type Budget struct {
	CPUMilli    uint64 `json:"cpu_milli"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Tasks       uint64 `json:"tasks"`
}

// Fits reports whether b fits within limit in every resource.
func (b Budget) Fits(limit Budget) bool {
	return b.CPUMilli <= limit.CPUMilli && b.MemoryBytes <= limit.MemoryBytes && b.Tasks <= limit.Tasks
}

// Add returns b + o. The authority adds only what fits a capacity, which
// is bounded by MaxQuantity, so it cannot overflow for any count of
// attempts a journal can hold.
func (b Budget) Add(o Budget) Budget {
	return Budget{b.CPUMilli + o.CPUMilli, b.MemoryBytes + o.MemoryBytes, b.Tasks + o.Tasks}
}

// Sub returns b − o, for an o that b holds.
func (b Budget) Sub(o Budget) Budget {
	return Budget{b.CPUMilli - o.CPUMilli, b.MemoryBytes - o.MemoryBytes, b.Tasks - o.Tasks}
}

// RemainingAfter returns what is left of b once used is taken, never
// below zero.
func (b Budget) RemainingAfter(used Budget) Budget {
	left := func(x, y uint64) uint64 {
		if y >= x {
			return 0
		}
		return x - y
	}
	return Budget{left(b.CPUMilli, used.CPUMilli), left(b.MemoryBytes, used.MemoryBytes), left(b.Tasks, used.Tasks)}
}

// Half returns b halved in every resource, rounding down.
func (b Budget) Half() Budget { return Budget{b.CPUMilli / 2, b.MemoryBytes / 2, b.Tasks / 2} }

// Amounts is b as the API shows it; a quantity beyond the API's int64 is
// shown as the largest.
func (b Budget) Amounts() v1alpha1.Amounts {
	return v1alpha1.Amounts{CPUMilli: clampInt64(b.CPUMilli), MemoryBytes: clampInt64(b.MemoryBytes), Tasks: clampInt64(b.Tasks)}
}

func clampInt64(q uint64) int64 { return int64(min(q, math.MaxInt64)) }

// Get returns b's quantity of r. Budget keeps its own fields, whose names
// its encoding in journals and on DevGuard's wire has always had.
func (b Budget) Get(r cgroup.Resource) uint64 {
	return cgroup.PerResource[uint64]{CPU: b.CPUMilli, Memory: b.MemoryBytes, PIDs: b.Tasks}.Get(r)
}

// validWorkload: every quantity positive, as DevGuard's
// validate_workload; none is too large to ask for.
func (b Budget) validWorkload() bool {
	return b.CPUMilli > 0 && b.MemoryBytes > 0 && b.Tasks > 0
}

// budgetOf is a Budget of quantities a manifest declares: positive
// int64s, as v1alpha1 validates them.
func budgetOf(cpu, memory, tasks int64) Budget {
	q := func(v int64) uint64 { return uint64(max(v, 0)) }
	return Budget{q(cpu), q(memory), q(tasks)}
}

// Levels is the least level per resource, as DevGuard's ResourceLevels.
type Levels cgroup.PerResource[v1alpha1.Level]

// Get returns the least level of r.
func (l Levels) Get(r cgroup.Resource) v1alpha1.Level {
	return cgroup.PerResource[v1alpha1.Level](l).Get(r)
}

// valid: a known level for every resource. Any level is a valid minimum
// for any resource, as in DevGuard: whether the host meets it is decided
// by rank against the plan (Plan.Satisfies), so that a cooperative
// memory minimum is met by a kernel limit and denied without one, never
// refused as malformed.
func (l Levels) valid() bool {
	return l.CPU.Rank() > 0 && l.Memory.Rank() > 0 && l.PIDs.Rank() > 0
}

// Intent is what an execution asks of the authority, as DevGuard's
// ResourceIntent: the profile it runs under, the quantities it reserves
// and the least level per resource.
type Intent struct {
	Profile   string `json:"profile"`
	Requested Budget `json:"requested"`
	Minimum   Levels `json:"minimum"`
}

// IntentFor returns the intent of an execution of profile with a
// defaulted request (v1alpha1.Workspace.Default fills it).
func IntentFor(profile string, req v1alpha1.ResourceRequest) (Intent, error) {
	if req.CPUMilli == nil || req.MemoryBytes == nil || req.Tasks == nil || req.Minimum == nil {
		return Intent{}, fmt.Errorf("resource request is not defaulted: %w", ErrInvalidRequest)
	}
	in := Intent{
		Profile:   profile,
		Requested: budgetOf(*req.CPUMilli, *req.MemoryBytes, *req.Tasks),
		Minimum:   Levels{req.Minimum.CPU, req.Minimum.Memory, req.Minimum.PIDs},
	}
	return in, in.validate()
}

func (in Intent) validate() error { return in.validateFor(false) }

// validateFor checks the intent; anyProfile accepts any identifier of
// DevGuard's wire as its profile, as a consumer's denied attempt may
// hold, where every attempt that may run names a Profile.
func (in Intent) validateFor(anyProfile bool) error {
	switch {
	case anyProfile && !v1alpha1.IsIdentifier(in.Profile):
		return fmt.Errorf("profile %q: %w", in.Profile, ErrInvalidRequest)
	case !anyProfile && v1alpha1.ValidateName(in.Profile) != nil:
		return fmt.Errorf("profile %q: %w", in.Profile, ErrInvalidRequest)
	}
	if !in.Requested.validWorkload() {
		return fmt.Errorf("requested quantities must be positive: %w", ErrInvalidRequest)
	}
	if !in.Minimum.valid() {
		return fmt.Errorf("minimum levels %+v: %w", in.Minimum, ErrInvalidRequest)
	}
	return nil
}

// Process is a process's kernel identity: a pid is the same process only
// with the same start time in the same boot.
type Process struct {
	UID uint32 `json:"uid"`
	PID int    `json:"pid"`
	// StartTime is field 22 of /proc/<pid>/stat: clock ticks after boot.
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
}

// Peer is what the transport's SO_PEERCRED says about a caller.
type Peer struct {
	UID uint32
	PID int
}

// Principal is a registered owner, as Register returned it, or a
// consumer's instance, as RegisterInstance returned it. Only they make
// one; the zero Principal is unauthorized.
type Principal struct {
	owner      string
	generation uint64
	process    Process
	epoch      uint64
	// consumer, consumerGeneration and instance name a consumer's
	// instance; owner and generation are empty then.
	consumer, consumerGeneration, instance string
}

// Instance returns the consumer's instance p is, and false when p is an
// owner's.
func (p Principal) Instance() (Instance, bool) {
	if p.instance == "" {
		return Instance{}, false
	}
	return Instance{ID: p.instance, Process: p.process}, true
}

// Consumer returns the consumer and generation of an instance's
// principal, empty for an owner's.
func (p Principal) Consumer() (id, generation string) { return p.consumer, p.consumerGeneration }

func (p Principal) instanceKey() instanceKey {
	return instanceKey{p.consumer, p.consumerGeneration, p.instance}
}

// Owner is the owner's name.
func (p Principal) Owner() string { return p.owner }

// Generation is the owner's generation.
func (p Principal) Generation() uint64 { return p.generation }

// Process is the owner's process.
func (p Principal) Process() Process { return p.process }

// Reservation is what a prepared attempt holds.
type Reservation struct {
	Quantities Budget `json:"quantities"`
	// PreparedAt is the moment before the request was taken.
	PreparedAt time.Time `json:"prepared_at"`
	// Deadline is PreparedAt + prepared_ttl: a prepared attempt expires at
	// it, inclusive; committed work never expires.
	Deadline time.Time `json:"deadline"`
}

// Record is an attempt as the journal holds it. Records returned by the
// authority are copies; changing one changes nothing.
type Record struct {
	// ID is the attempt key: 32 lowercase hex digits, the same as the
	// launch's scope ID.
	ID string `json:"id"`
	// Owner and Generation name the owner that admitted the attempt.
	Owner      string `json:"owner"`
	Generation uint64 `json:"generation"`
	// OwnerProcess is the owner's process when it admitted the attempt.
	OwnerProcess Process `json:"owner_process"`
	// Digest is the ExecutionMeaning digest; Fingerprint binds it to the
	// intent (the admission fingerprint).
	Digest      string `json:"digest"`
	Fingerprint string `json:"fingerprint"`
	Intent      Intent `json:"intent"`
	Phase       Phase  `json:"phase"`
	// Denial is set when Phase is denied.
	Denial Denial `json:"denial,omitempty"`
	// Reservation and Plan are set for every attempt that was prepared.
	Reservation *Reservation `json:"reservation,omitempty"`
	Plan        *Plan        `json:"plan,omitempty"`
	// Scope is the scope unit name, once one was bound or observed.
	Scope string `json:"scope,omitempty"`
	// Root is the process moved into the scope when it was bound.
	Root *Process `json:"root,omitempty"`
	// Applied is the read-back evidence the scope was bound with.
	Applied *cgroup.Applied `json:"applied,omitempty"`
	// Abandoned is the owner's report that released an unbound launch.
	Abandoned AbandonReason `json:"abandoned,omitempty"`
	// Release is set when Phase is released.
	Release ReleaseReason `json:"release,omitempty"`
	// OOMKilled records that the kernel OOM-killed a process of the
	// scope: the run did not succeed, whatever else happened.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// ScopeLost is sticky: the scope was observed missing while the
	// attempt was charged, so only a reboot can prove its end.
	ScopeLost bool `json:"scope_lost,omitempty"`
	// BootID is the boot the attempt was admitted in.
	BootID string `json:"boot_id"`

	// Key, Instance and PolicyRevision are set for a consumer's attempt
	// (DevGuard's wire), whose ID is Key.ID(); Owner and Generation are
	// empty then.
	Key            *AttemptKey `json:"key,omitempty"`
	Instance       *Instance   `json:"instance,omitempty"`
	PolicyRevision string      `json:"policy_revision,omitempty"`
	// PreparedMS and BoundMS are when a consumer's attempt was prepared
	// and bound, in milliseconds since boot (CLOCK_BOOTTIME), as
	// DevGuard's records tell time.
	PreparedMS uint64 `json:"prepared_ms,omitempty"`
	BoundMS    uint64 `json:"bound_ms,omitempty"`

	// permitHash is the SHA-256 of the launch permit, once one was
	// issued. It is stored with the record but never shown.
	permitHash string
}

// KnownNotStarted reports whether the attempt provably never ran: denied,
// cancelled, expired, or released because nothing was created. Returning
// a reservation alone is not such proof.
func (r Record) KnownNotStarted() bool {
	switch r.Phase {
	case PhaseDenied, PhaseCancelled, PhaseExpired:
		return true
	}
	return r.Phase == PhaseReleased && r.Release == ReleaseNoHelperCreated
}

// charge is what r holds against capacity.
func (r *Record) charge() Budget {
	if r == nil || !r.Phase.Charged() || r.Reservation == nil {
		return Budget{}
	}
	return r.Reservation.Quantities
}

// clone returns a deep copy of r.
func (r *Record) clone() *Record {
	c := *r
	if r.Reservation != nil {
		v := *r.Reservation
		c.Reservation = &v
	}
	if r.Plan != nil {
		v := *r.Plan
		c.Plan = &v
	}
	if r.Root != nil {
		v := *r.Root
		c.Root = &v
	}
	if r.Applied != nil {
		v := *r.Applied
		v.Enforced = maps.Clone(r.Applied.Enforced)
		c.Applied = &v
	}
	if r.Key != nil {
		v := *r.Key
		c.Key = &v
	}
	if r.Instance != nil {
		v := *r.Instance
		c.Instance = &v
	}
	return &c
}

// scopeName is the unit name the attempt's scope must have.
func (r *Record) scopeName() string { return scope.ScopeName(r.Intent.Profile, r.ID) }

// validate checks the invariants every stored record keeps; Open refuses
// a journal with a record that breaks one.
func (r *Record) validate() error {
	// The ID is read from the journal and may be anything: quoted, in
	// ASCII, so a corrupt byte shows as its escape.
	bad := func(what string) error {
		return fmt.Errorf("attempt %+q: %s: %w", r.ID, what, ErrJournalInconsistent)
	}
	switch {
	case !scope.ValidID(r.ID):
		return bad("invalid key")
	case r.Key == nil && (!validOwner(r.Owner) || r.Generation == 0 || r.Instance != nil):
		return bad("invalid owner")
	case r.Key != nil && (!r.Key.valid() || r.ID != r.Key.ID() || r.Owner != "" || r.Generation != 0 ||
		r.Instance == nil || !v1alpha1.IsIdentifier(r.Instance.ID) || !v1alpha1.IsIdentifier(r.PolicyRevision)):
		return bad("invalid consumer's attempt")
	case !validDigest(r.Digest) || !validDigest(r.Fingerprint):
		return bad("invalid digest")
	case r.Intent.validateFor(r.Key != nil && r.Phase == PhaseDenied) != nil:
		return bad("invalid intent")
	case !r.Phase.Valid():
		return bad("invalid phase")
	case (r.Phase == PhaseDenied) != (r.Denial != ""):
		return bad("denial does not match phase")
	case r.Phase == PhaseDenied && (r.Reservation != nil || r.Plan != nil):
		return bad("denied attempt holds a reservation")
	case r.Phase != PhaseDenied && (r.Reservation == nil || r.Plan == nil):
		return bad("admitted attempt lacks its reservation")
	case r.Reservation != nil && r.Reservation.Quantities != r.Intent.Requested:
		return bad("reservation differs from the request")
	case (r.Phase == PhaseReleased) != (r.Release != ""):
		return bad("release reason does not match phase")
	case r.Release == ReleaseNoHelperCreated && (r.Scope != "" || r.Applied != nil):
		return bad("no helper created, yet a scope is recorded")
	case r.Release == ReleaseScopeTerminated && r.Scope == "":
		return bad("scope terminated without a scope")
	case (r.Phase == PhaseScopeBound || r.Phase == PhaseRunAuthorized) && (r.Scope == "" || r.Applied == nil || r.Root == nil):
		return bad("bound attempt lacks its evidence")
	case r.Scope != "" && r.Scope != r.scopeName():
		return bad("scope name does not match the attempt")
	case r.Abandoned != "" && !r.Abandoned.valid():
		return bad("invalid abandon reason")
	case r.BootID == "":
		return bad("no boot ID")
	case r.permitHash != "" && (!validDigest(r.permitHash) || r.Phase == PhasePrepared || r.Phase == PhaseDenied):
		return bad("launch permit without a launch")
	}
	return nil
}

// Permit is the one-time launch permit BeginLaunch returns. Only its
// SHA-256 is stored. It never prints itself.
type Permit struct{ secret string }

func newPermit() Permit {
	var b [32]byte
	rand.Read(b[:]) // never returns an error; it crashes the program instead
	return Permit{hex.EncodeToString(b[:])}
}

// ParsePermit reads a permit as Expose wrote it.
func ParsePermit(s string) (Permit, error) {
	if !validDigest(s) {
		return Permit{}, fmt.Errorf("permit: %w", ErrInvalidRequest)
	}
	return Permit{s}, nil
}

// Expose returns the secret, for the transport that hands it to the owner.
func (p Permit) Expose() string { return p.secret }

// IsZero reports whether p holds no permit.
func (p Permit) IsZero() bool { return p.secret == "" }

func (p Permit) String() string   { return "Permit([REDACTED])" }
func (p Permit) GoString() string { return p.String() }

// Format keeps every fmt verb from printing the secret.
func (p Permit) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }

func (p Permit) hash() string {
	sum := sha256.Sum256([]byte(p.secret))
	return hex.EncodeToString(sum[:])
}

func (p Permit) matches(hash string) bool {
	h := p.hash()
	return !p.IsZero() && subtle.ConstantTimeCompare([]byte(h), []byte(hash)) == 1
}

// Launch is BeginLaunch's answer.
type Launch struct {
	Record Record
	// Permit is set on the first transition to launch_committed only; a
	// replay returns none, so no second launch can be started.
	Permit Permit
}

// Run is AuthorizeRun's answer.
type Run struct {
	Record Record
	// MayExec is true on the first authorization only: a replayed answer
	// never permits a second exec.
	MayExec bool
}

// ScopeEvidence is what the launch code or the agent controller observed
// of an attempt's scope.
type ScopeEvidence struct {
	// Name is the scope unit name observed.
	Name string
	// ObservedAt is when the observation completed, on the authority's
	// clock. Evidence older than MaxEvidenceAge is not evidence.
	ObservedAt time.Time
	// Exists reports whether the scope's cgroup directory was there.
	Exists bool
	// Populated is cgroup.events' populated, when Exists.
	Populated bool
	// ProcessExited reports that the launched process is known to have
	// exited (its pidfd, or its start time gone from /proc).
	ProcessExited bool
	// OOMKilled reports that the kernel OOM-killed a process of the scope:
	// cgroup.Usage.OOMKills above zero.
	OOMKilled bool
	// Applied is the limits read back, for BindScope.
	Applied cgroup.Applied
	// Root is the process the launch moved into the scope, for BindScope,
	// when it is not the caller's own: a launcher that moves the process
	// it launches (rather than itself) names that process here, with the
	// start time it pinned it by. Nil means the caller's process.
	Root *Process
}

// MaxEvidenceAge is how old evidence may be when it is judged, as
// DevGuard's two-second freshness.
const MaxEvidenceAge = 2 * time.Second

func (e ScopeEvidence) fresh(now time.Time) bool {
	age := now.Sub(e.ObservedAt)
	return !e.ObservedAt.IsZero() && age >= 0 && age <= MaxEvidenceAge
}

// validOwner: 1 to 128 of [A-Za-z0-9._:-], as DevGuard's identifiers.
func validOwner(s string) bool { return v1alpha1.IsIdentifier(s) }

// validDigest: 64 lowercase hex digits.
func validDigest(s string) bool { return v1alpha1.IsDigest(s) }
