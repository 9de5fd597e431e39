package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// Consumers are the clients of DevGuard's wire (package devguardwire):
// each registers instances, one per process, and admits attempts under
// keys of its own. Their attempts share the capacity and the journal with
// marshald's own launches, and settle by the same evidence.

// Role is what a consumer's sessions may do, as DevGuard's ConsumerRole.
type Role string

// Roles.
const (
	// RoleWorkload admits and launches its own executions and reserves
	// nothing for itself.
	RoleWorkload Role = "workload"
	// RoleControlService is a long-lived service whose control costs a
	// static reservation per instance covers.
	RoleControlService Role = "control_service"
)

// Consumer is a consumer the authority serves, as its Consumer manifest
// declares it.
type Consumer struct {
	ID           string
	Generation   string
	Role         Role
	MaxInstances int
	// ControlReservation is what each instance reserves for its own
	// control: taken off the work capacity MaxInstances times, whether or
	// not the instances run.
	ControlReservation Budget
}

func (c Consumer) validate() error {
	switch {
	case !v1alpha1.IsIdentifier(c.ID) || !v1alpha1.IsIdentifier(c.Generation):
		return fmt.Errorf("consumer %q generation %q: %w", c.ID, c.Generation, ErrInvalidRequest)
	case c.MaxInstances < 1 || c.MaxInstances > v1alpha1.MaxInstances:
		return fmt.Errorf("consumer %s: max instances %d: %w", c.ID, c.MaxInstances, ErrInvalidRequest)
	case c.Role == RoleWorkload && c.ControlReservation != (Budget{}):
		return fmt.Errorf("consumer %s: a workload reserves nothing: %w", c.ID, ErrInvalidRequest)
	case c.Role == RoleControlService && !c.ControlReservation.validWorkload():
		return fmt.Errorf("consumer %s: a control service reserves every resource: %w", c.ID, ErrInvalidRequest)
	case c.Role != RoleWorkload && c.Role != RoleControlService:
		return fmt.Errorf("consumer %s: role %q: %w", c.ID, c.Role, ErrInvalidRequest)
	}
	return nil
}

// AttemptKey is a consumer's attempt key, as DevGuard's AttemptKey.
type AttemptKey struct {
	ConsumerID         string `json:"consumer_id"`
	ConsumerGeneration string `json:"consumer_generation"`
	AttemptID          string `json:"attempt_id"`
}

func (k AttemptKey) valid() bool {
	return v1alpha1.IsIdentifier(k.ConsumerID) && v1alpha1.IsIdentifier(k.ConsumerGeneration) && v1alpha1.IsIdentifier(k.AttemptID)
}

// ID is the attempt's 32 hex digits, which its scope's name carries: the
// first half of the SHA-256 of its three identifiers, each ended by a
// NUL, which no identifier holds, so that no two keys share an input.
func (k AttemptKey) ID() string {
	h := sha256.New()
	for _, s := range []string{"marshal.dev/attempt-key", k.ConsumerID, k.ConsumerGeneration, k.AttemptID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Instance is a consumer's registered instance: its id and the process
// that registered it, which alone acts for it.
type Instance struct {
	ID      string  `json:"instance_id"`
	Process Process `json:"process"`
}

// instanceKey names an instance in the journal and the ledger.
type instanceKey struct{ consumer, generation, id string }

func (k instanceKey) bytes() []byte {
	return []byte(k.consumer + "\x00" + k.generation + "\x00" + k.id)
}

// instanceRecord is a registered instance as the journal holds it. A
// retired instance's id cannot be registered again.
type instanceRecord struct {
	Consumer   string   `json:"consumer"`
	Generation string   `json:"generation"`
	Instance   Instance `json:"instance"`
	Retired    bool     `json:"retired,omitempty"`
}

func (r *instanceRecord) key() instanceKey {
	return instanceKey{r.Consumer, r.Generation, r.Instance.ID}
}

func (r *instanceRecord) validate(stored []byte) error {
	if string(r.key().bytes()) != string(stored) || !v1alpha1.IsIdentifier(r.Consumer) || !v1alpha1.IsIdentifier(r.Generation) ||
		!v1alpha1.IsIdentifier(r.Instance.ID) || r.Instance.Process.PID <= 0 || r.Instance.Process.BootID == "" {
		return fmt.Errorf("instance %q: %w", stored, ErrJournalInconsistent)
	}
	return nil
}

// SetConsumers sets the consumers the authority serves and the policy
// revision their attempts record (empty: v1alpha1.DefaultPolicyRevision).
// Their control reservations, each times its max_instances, come off the
// work capacity from then on; existing reservations are never revoked. A
// consumer left out can no longer act: its principals are refused, and
// its attempts settle by evidence alone.
func (a *Authority) SetConsumers(cs []Consumer, policyRevision string) error {
	if policyRevision == "" {
		policyRevision = v1alpha1.DefaultPolicyRevision
	}
	if !v1alpha1.IsIdentifier(policyRevision) {
		return fmt.Errorf("policy revision %q: %w", policyRevision, ErrInvalidRequest)
	}
	byID := make(map[string]Consumer, len(cs))
	var reserved Budget
	for _, c := range cs {
		if err := c.validate(); err != nil {
			return err
		}
		if _, dup := byID[c.ID]; dup {
			return fmt.Errorf("consumer %s declared twice: %w", c.ID, ErrInvalidRequest)
		}
		byID[c.ID] = c
		reserved = addCapped(reserved, mulCapped(c.ControlReservation, uint64(c.MaxInstances)))
	}
	a.inMu.Lock()
	defer a.inMu.Unlock()
	a.inputs.consumers, a.inputs.reserved, a.inputs.policyRevision = byID, reserved, policyRevision
	return nil
}

// addCapped and mulCapped saturate at MaxQuantity: a reservation that
// large leaves no work capacity either way.
func addCapped(a, b Budget) Budget {
	add := func(x, y uint64) uint64 {
		s, carry := bits.Add64(x, y, 0)
		if carry != 0 || s > MaxQuantity {
			return MaxQuantity
		}
		return s
	}
	return Budget{add(a.CPUMilli, b.CPUMilli), add(a.MemoryBytes, b.MemoryBytes), add(a.Tasks, b.Tasks)}
}

func mulCapped(b Budget, n uint64) Budget {
	mul := func(x uint64) uint64 {
		hi, lo := bits.Mul64(x, n)
		if hi != 0 || lo > MaxQuantity {
			return MaxQuantity
		}
		return lo
	}
	return Budget{mul(b.CPUMilli), mul(b.MemoryBytes), mul(b.Tasks)}
}

// RegisterInstance registers instance instanceID of consumer consumerID
// at generation for the caller, peer: its process, with the start time
// the authority reads itself. A first registration is recorded; the same
// instance registered again by the same process returns a principal and
// writes nothing, however often (CodeSpace registers in every session).
//
// It is ErrUnauthorized when the consumer is not served at that
// generation or the caller is not running, ErrAttemptConflict when the
// instance was registered by another process or retired, and
// ErrInstancesFull when the consumer has max_instances instances
// already: instances whose process ended and that hold no charged
// attempt are retired first, so owners that exited free their place at
// once.
func (a *Authority) RegisterInstance(ctx context.Context, consumerID, generation, instanceID string, peer Peer) (Principal, error) {
	if !v1alpha1.IsIdentifier(consumerID) || !v1alpha1.IsIdentifier(generation) || !v1alpha1.IsIdentifier(instanceID) || peer.PID <= 0 {
		return Principal{}, fmt.Errorf("consumer %q instance %q pid %d: %w", consumerID, instanceID, peer.PID, ErrInvalidRequest)
	}
	start, err := a.inspector.StartTime(peer.PID)
	if errors.Is(err, ErrNoProcess) {
		return Principal{}, fmt.Errorf("pid %d is not running: %w", peer.PID, ErrUnauthorized)
	}
	if err != nil {
		return Principal{}, err
	}
	inst := Instance{ID: instanceID, Process: Process{UID: peer.UID, PID: peer.PID, StartTime: start, BootID: a.bootID}}
	k := instanceKey{consumerID, generation, instanceID}
	p, err := call(ctx, a, a.clock.Now(), func(b *batch) (Principal, error) {
		c, ok := a.hostInputs().consumers[consumerID]
		if !ok || c.Generation != generation {
			return Principal{}, fmt.Errorf("consumer %q generation %q is not served: %w", consumerID, generation, ErrUnauthorized)
		}
		p := Principal{process: inst.Process, epoch: a.epoch, consumer: consumerID, consumerGeneration: generation, instance: instanceID}
		if cur, ok := b.instance(k); ok {
			if cur.Retired || cur.Instance != inst {
				return Principal{}, fmt.Errorf("instance %s of %s was registered by another process: %w", instanceID, consumerID, ErrAttemptConflict)
			}
			return p, nil
		}
		if b.liveInstances(consumerID) >= c.MaxInstances {
			b.retireEnded(consumerID)
			if b.liveInstances(consumerID) >= c.MaxInstances {
				return Principal{}, fmt.Errorf("consumer %s has %d instances: %w", consumerID, c.MaxInstances, ErrInstancesFull)
			}
		}
		b.putInstance(instanceRecord{Consumer: consumerID, Generation: generation, Instance: inst})
		return p, nil
	})
	if err != nil {
		return Principal{}, err
	}
	a.regMu.Lock()
	a.registered[k] = p
	a.regMu.Unlock()
	return p, nil
}

// Registered returns the principal of an instance registered since the
// authority was opened, for the launch helper of its owner: the helper
// presents the instance and the permit, never a credential.
func (a *Authority) Registered(consumerID, generation, instanceID string) (Principal, bool) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	p, ok := a.registered[instanceKey{consumerID, generation, instanceID}]
	return p, ok
}

// liveInstances counts the consumer's instances that are not retired, of
// any generation.
func (b *batch) liveInstances(consumer string) int {
	n := 0
	for _, r := range b.allInstances() {
		if r.Consumer == consumer && !r.Retired {
			n++
		}
	}
	return n
}

// retireEnded retires the consumer's instances whose process has ended
// and that own no charged attempt.
func (b *batch) retireEnded(consumer string) {
	var ended []instanceRecord
	for _, r := range b.allInstances() {
		if r.Consumer == consumer && !r.Retired && b.a.processGone(r.Instance.Process) {
			ended = append(ended, r)
		}
	}
	if len(ended) == 0 {
		return
	}
	busy := map[Instance]bool{}
	for _, id := range b.chargedIDs() {
		if r, err := b.record(id); err == nil && r != nil && r.Instance != nil && r.Phase.Charged() {
			busy[*r.Instance] = true
		}
	}
	for _, r := range ended {
		if !busy[r.Instance] {
			r.Retired = true
			b.putInstance(r)
		}
	}
}

// chargedIDs lists the attempts charged as of this batch.
func (b *batch) chargedIDs() []string {
	ids := slices.Collect(maps.Keys(b.a.led.charged))
	for id, r := range b.recs.staged {
		if _, known := b.a.led.charged[id]; r.Phase.Charged() && !known {
			ids = append(ids, id)
		}
	}
	return ids
}

// allInstances returns every instance as staged or stored.
func (b *batch) allInstances() []instanceRecord { return b.instances.all() }

func (b *batch) instance(k instanceKey) (instanceRecord, bool) { return b.instances.get(k) }

func (b *batch) putInstance(r instanceRecord) { b.instances.set(r.key(), r) }

// authorizeInstance checks that p, an instance's principal, is of this
// opening, its instance registered by its process and not retired, and
// its consumer still served at its generation.
func (b *batch) authorizeInstance(p Principal) error {
	r, ok := b.instance(p.instanceKey())
	c, served := b.a.hostInputs().consumers[p.consumer]
	switch {
	case p.epoch != b.a.epoch:
		return fmt.Errorf("not registered with this authority: %w", ErrUnauthorized)
	case !ok || r.Retired || r.Instance.Process != p.process:
		return fmt.Errorf("instance %s of %s is not registered: %w", p.instance, p.consumer, ErrUnauthorized)
	case !served || c.Generation != p.consumerGeneration:
		return fmt.Errorf("consumer %s generation %s is not served: %w", p.consumer, p.consumerGeneration, ErrUnauthorized)
	}
	return nil
}

// ownedByInstance checks that r is an attempt of p's instance: of its
// consumer and generation, and admitted by it. DevGuard answers another
// instance's attempt unauthorized, where marshald's own owners see
// another's attempt as not found.
func ownedByInstance(p Principal, r *Record) error {
	in, _ := p.Instance()
	if r.Key == nil || r.Instance == nil || r.Key.ConsumerID != p.consumer || r.Key.ConsumerGeneration != p.consumerGeneration || *r.Instance != in {
		return fmt.Errorf("attempt %s is not of instance %s: %w", r.ID, p.instance, ErrUnauthorized)
	}
	return nil
}

// AdmitKey admits attempt key for p, an instance's principal, as Admit
// does for marshald's own owners: prepared, or denied
// (resource_policy_unsupported, resource_unavailable) and recorded, or a
// replay of the stored record for the same fingerprint and instance,
// else ErrAttemptConflict. It differs where DevGuard does:
//
//   - the profile is an identifier of DevGuard's wire: one that names no
//     declared Profile (Options.Profiles) is denied
//     resource_policy_unsupported, not malformed;
//   - the plan is what DevGuard's wire can name: a resource this host
//     holds only by cgroup v1 is planned as accounted (Plan.Nameable);
//   - quantities are any u64: one above every capacity is denied
//     resource_unavailable;
//   - the record keeps the key, the instance, the policy revision and
//     the boot-relative time it was prepared at.
//
// A key of another consumer or generation is ErrUnauthorized.
func (a *Authority) AdmitKey(ctx context.Context, p Principal, key AttemptKey, digest string, intent Intent) (Record, error) {
	now := a.clock.Now()
	prepared := a.uptime()
	if !key.valid() || !validDigest(digest) || !v1alpha1.IsIdentifier(intent.Profile) ||
		!intent.Requested.validWorkload() || !intent.Minimum.valid() {
		return Record{}, fmt.Errorf("admission of %+v: %w", key, ErrInvalidRequest)
	}
	in, ok := p.Instance()
	if !ok || key.ConsumerID != p.consumer || key.ConsumerGeneration != p.consumerGeneration {
		return Record{}, fmt.Errorf("attempt key of consumer %s: %w", key.ConsumerID, ErrUnauthorized)
	}
	fp := fingerprint(digest, intent)
	id := key.ID()
	return call(ctx, a, now, func(b *batch) (Record, error) {
		if err := b.authorizeInstance(p); err != nil {
			return Record{}, err
		}
		r, err := b.load(id, now)
		if err != nil {
			return Record{}, err
		}
		if r != nil {
			if r.Key == nil || *r.Key != key || r.Fingerprint != fp || r.Instance == nil || *r.Instance != in {
				return Record{}, fmt.Errorf("attempt %+v: %w", key, ErrAttemptConflict)
			}
			return *r, nil
		}
		hi := a.hostInputs()
		if !hi.hostSet || hi.plan == nil {
			return Record{}, fmt.Errorf("no host capacity or plan yet: %w", ErrUnavailable)
		}
		n := &Record{
			ID: id, Key: &key, Instance: &in, PolicyRevision: hi.policyRevision,
			Digest: digest, Fingerprint: fp, Intent: intent, BootID: a.bootID,
		}
		b.decide(n, hi, hi.plan.Nameable(), a.profileDeclared(intent.Profile), now)
		if n.Phase == PhasePrepared {
			n.PreparedMS = uint64(prepared.Milliseconds())
		}
		if err := b.put(nil, n); err != nil {
			return Record{}, err
		}
		return *n, nil
	})
}

// profileDeclared reports whether a consumer's attempt may run under
// profile: a Profile name that Options.Profiles says is declared.
func (a *Authority) profileDeclared(profile string) bool {
	if v1alpha1.ValidateName(profile) != nil {
		return false
	}
	return a.profiles == nil || a.profiles(profile)
}

// Nameable is the plan as DevGuard's wire can name it: a resource held
// by cgroup v1, which the wire has no method for, is planned as
// accounted, so that an attempt's plan is what it gets and what it is
// told, and a kernel minimum for it is denied rather than named falsely.
func (p Plan) Nameable() Plan {
	out := p
	accounted := func(e *cgroup.Enforcement) {
		if e.Method == cgroup.MethodCgroupV1 {
			*e = cgroup.Enforcement{Level: v1alpha1.LevelAccounted, Method: cgroup.MethodAccounting}
		}
	}
	accounted(&out.CPU)
	accounted(&out.Memory)
	accounted(&out.PIDs)
	return out
}
