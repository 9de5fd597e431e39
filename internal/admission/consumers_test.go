package admission

import (
	"math"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// codespace is CodeSpace's gateway as a consumer: a control service of
// two instances, each reserving half a CPU, 1 GiB and 16 tasks.
var codespace = Consumer{
	ID: "codespace", Generation: "g1", Role: RoleControlService, MaxInstances: 2,
	ControlReservation: Budget{CPUMilli: 500, MemoryBytes: gib, Tasks: 16},
}

// interactive is DevGuard's intent for CodeSpace's executions.
var interactive = Intent{
	Profile:   "interactive",
	Requested: Budget{CPUMilli: 100, MemoryBytes: 64 << 20, Tasks: 8},
	Minimum:   Levels{v1alpha1.LevelAccounted, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted},
}

func csKey(id string) AttemptKey {
	return AttemptKey{ConsumerID: "codespace", ConsumerGeneration: "g1", AttemptID: id}
}

// consumerHarness serves codespace; pid 200 and 300 are running.
func consumerHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.consumers = []Consumer{codespace}
	h.insp.set(200, 7)
	h.insp.set(300, 8)
	h.restart()
	return h
}

func (h *harness) registerInstance(id string, pid int) Principal {
	h.t.Helper()
	p, err := h.a.RegisterInstance(h.t.Context(), "codespace", "g1", id, Peer{UID: 1000, PID: pid})
	if err != nil {
		h.t.Fatalf("RegisterInstance(%s, %d) = %v", id, pid, err)
	}
	return p
}

// The consumers' control reservations, each times max_instances, come off
// the work capacity, whether their instances run or not.
func TestControlReservationsComeOffTheWorkCapacity(t *testing.T) {
	h := consumerHarness(t)
	s := h.a.Snapshot()
	full := devguardBudget()
	want := full.RemainingAfter(Budget{1000, 2 * gib, 32})
	if s.Capacity != want || s.Reserved != (Budget{1000, 2 * gib, 32}) {
		t.Fatalf("capacity %+v reserved %+v, want %+v and 2 instances' reservations", s.Capacity, s.Reserved, want)
	}
	if s.Target != want {
		t.Errorf("target at normal pressure = %+v, want the work capacity", s.Target)
	}
	for _, bad := range []Consumer{
		{ID: "w", Generation: "g", Role: RoleWorkload, MaxInstances: 1, ControlReservation: Budget{1, 0, 0}},
		{ID: "c", Generation: "g", Role: RoleControlService, MaxInstances: 1, ControlReservation: Budget{1, 0, 1}},
		{ID: "x", Generation: "g", Role: RoleWorkload, MaxInstances: 65},
		{ID: "a b", Generation: "g", Role: RoleWorkload, MaxInstances: 1},
	} {
		if err := h.a.SetConsumers([]Consumer{bad}, ""); err == nil {
			t.Errorf("SetConsumers(%+v) = nil, want an error", bad)
		}
	}
	if err := h.a.SetConsumers([]Consumer{codespace, codespace}, ""); err == nil {
		t.Error("a consumer served twice was accepted")
	}
}

// DevGuard: registration binds the observed peer; every session registers
// again, which reactivates the instance and writes nothing; another
// process under the instance's id is a conflict; the pool is bounded.
func TestRegisterInstanceReactivatesAndBoundsThePool(t *testing.T) {
	h := consumerHarness(t)
	ctx := t.Context()
	p := h.registerInstance("codespace-a", 200)
	if in, ok := p.Instance(); !ok || in.ID != "codespace-a" || in.Process.PID != 200 || in.Process.StartTime != 7 || in.Process.BootID != "boot-a" {
		t.Fatalf("instance = %+v %v, want codespace-a of pid 200 started at 7 in boot-a", in, ok)
	}
	before := h.commits()
	for range 3 {
		if again := h.registerInstance("codespace-a", 200); again != p {
			t.Fatalf("reactivation = %+v, want %+v", again, p)
		}
	}
	if h.commits() != before {
		t.Error("a reactivation wrote to the journal")
	}
	_, err := h.a.RegisterInstance(ctx, "codespace", "g1", "codespace-a", Peer{UID: 1000, PID: 300})
	wantErr(t, "another process under the instance's id", err, ErrAttemptConflict)
	_, err = h.a.RegisterInstance(ctx, "codespace", "g2", "codespace-b", Peer{UID: 1000, PID: 300})
	wantErr(t, "a generation not served", err, ErrUnauthorized)
	_, err = h.a.RegisterInstance(ctx, "ci", "g1", "ci-1", Peer{UID: 1000, PID: 300})
	wantErr(t, "a consumer not served", err, ErrUnauthorized)
	_, err = h.a.RegisterInstance(ctx, "codespace", "g1", "codespace-b", Peer{UID: 1000, PID: 400})
	wantErr(t, "a process not running", err, ErrUnauthorized)

	h.registerInstance("codespace-b", 300)
	h.insp.set(400, 9)
	_, err = h.a.RegisterInstance(ctx, "codespace", "g1", "codespace-c", Peer{UID: 1000, PID: 400})
	wantErr(t, "a third instance of two", err, ErrInstancesFull)

	// An owner that exited holding nothing frees its place at once, and
	// its id is never taken again.
	h.insp.kill(300)
	h.registerInstance("codespace-c", 400)
	h.insp.set(300, 8)
	_, err = h.a.RegisterInstance(ctx, "codespace", "g1", "codespace-b", Peer{UID: 1000, PID: 300})
	wantErr(t, "a retired instance registered again", err, ErrAttemptConflict)
}

// An owner that exited while it holds a charged attempt keeps its place
// until the attempt settles.
func TestAnEndedOwnerWithChargedWorkKeepsItsPlace(t *testing.T) {
	h := consumerHarness(t)
	a := h.registerInstance("codespace-a", 200)
	h.registerInstance("codespace-b", 300)
	if r := h.admitKey(a, "x"); r.Phase != PhasePrepared {
		t.Fatalf("Admit = %s", r.Phase)
	}
	h.insp.kill(200)
	h.insp.set(400, 9)
	_, err := h.a.RegisterInstance(t.Context(), "codespace", "g1", "codespace-c", Peer{UID: 1000, PID: 400})
	wantErr(t, "a place held by charged work", err, ErrInstancesFull)
}

func (h *harness) admitKey(p Principal, attempt string) Record {
	h.t.Helper()
	r, err := h.a.AdmitKey(h.t.Context(), p, csKey(attempt), meaning, interactive)
	if err != nil {
		h.t.Fatalf("AdmitKey(%s) = %v", attempt, err)
	}
	return r
}

// A consumer's attempt is recorded with its key, instance, policy
// revision and boot-relative time; a replay returns it, another meaning
// under its key conflicts, and it is its instance's alone.
func TestAdmitKeyRecordsAConsumersAttempt(t *testing.T) {
	h := consumerHarness(t)
	ctx := t.Context()
	h.uptime.Store(int64(9 * time.Second))
	p := h.registerInstance("codespace-a", 200)
	r := h.admitKey(p, "a-1")
	in, _ := p.Instance()
	k := csKey("a-1")
	switch {
	case r.Phase != PhasePrepared:
		t.Fatalf("phase = %s (%s), want prepared", r.Phase, r.Denial)
	case r.ID != k.ID() || r.Key == nil || *r.Key != k || r.Instance == nil || *r.Instance != in:
		t.Errorf("record %s key %+v instance %+v, want %s, %+v, %+v", r.ID, r.Key, r.Instance, k.ID(), k, in)
	case r.PolicyRevision != "rev-1" || r.PreparedMS != 9000 || r.Owner != "" || r.Generation != 0:
		t.Errorf("policy revision %q prepared at %d ms, owner %q %d; want rev-1 at 9000, no owner", r.PolicyRevision, r.PreparedMS, r.Owner, r.Generation)
	case r.Reservation.Deadline.Sub(r.Reservation.PreparedAt) != 5*time.Second:
		t.Errorf("prepared TTL = %s, want 5s", r.Reservation.Deadline.Sub(r.Reservation.PreparedAt))
	}
	fp, _ := Fingerprint(meaning, interactive)
	if r.Fingerprint != fp {
		t.Errorf("fingerprint = %s, want DevGuard's %s", r.Fingerprint, fp)
	}
	if again := h.admitKey(p, "a-1"); !sameRecord(again, r) {
		t.Errorf("replay = %+v, want the stored record", again)
	}
	other := interactive
	other.Requested.Tasks = 9
	_, err := h.a.AdmitKey(ctx, p, k, meaning, other)
	wantErr(t, "another intent under the key", err, ErrAttemptConflict)

	q := h.registerInstance("codespace-b", 300)
	_, err = h.a.Lookup(ctx, q, k.ID())
	wantErr(t, "another instance's lookup", err, ErrUnauthorized)
	_, err = h.a.Cancel(ctx, q, k.ID())
	wantErr(t, "another instance's cancel", err, ErrUnauthorized)
	_, err = h.a.AdmitKey(ctx, q, k, meaning, interactive)
	wantErr(t, "another instance admitting the key", err, ErrAttemptConflict)
	_, err = h.a.AdmitKey(ctx, p, AttemptKey{"ci", "g1", "a-1"}, meaning, interactive)
	wantErr(t, "another consumer's key", err, ErrUnauthorized)
	_, err = h.a.Lookup(ctx, p, csKey("never").ID())
	wantErr(t, "an unknown key", err, ErrNotFound)
	owner := h.ready()
	_, err = h.a.Lookup(ctx, owner, k.ID())
	wantErr(t, "marshald's own owner", err, ErrNotFound)

	c, err := h.a.Cancel(ctx, p, k.ID())
	if err != nil || c.Phase != PhaseCancelled || h.committed() != (Budget{}) {
		t.Fatalf("Cancel = %s, %v; committed %+v; want cancelled and the capacity back", c.Phase, err, h.committed())
	}
}

// DevGuard's denials are records, and hold nothing: a profile no Profile
// names, a minimum the plan cannot name, and quantities no capacity
// holds, up to the largest u64.
func TestAdmitKeyDeniesWithoutReserving(t *testing.T) {
	h := consumerHarness(t)
	h.profiles = func(name string) bool { return name == "interactive" }
	h.restart()
	p := h.registerInstance("codespace-a", 200)
	huge := interactive
	huge.Requested.MemoryBytes = math.MaxUint64
	kernel := interactive
	kernel.Minimum.Memory = v1alpha1.LevelKernel
	undeclared := interactive
	undeclared.Profile = "batch"
	notAName := interactive
	notAName.Profile = "Batch_Jobs"
	for i, tc := range []struct {
		name   string
		intent Intent
		denial Denial
	}{
		{"u64_max_memory", huge, DenialResourceUnavailable},
		// kernelCaps hold memory by cgroup v1, which DevGuard's wire
		// cannot name.
		{"kernel_memory_by_cgroup_v1", kernel, DenialPolicyUnsupported},
		{"undeclared_profile", undeclared, DenialPolicyUnsupported},
		{"profile_not_a_name", notAName, DenialPolicyUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := csKey("d-" + strings.Repeat("x", i))
			r, err := h.a.AdmitKey(t.Context(), p, k, meaning, tc.intent)
			if err != nil || r.Phase != PhaseDenied || r.Denial != tc.denial || r.Reservation != nil {
				t.Fatalf("AdmitKey = %s %s, %v; want denied %s, nothing reserved", r.Phase, r.Denial, err, tc.denial)
			}
			if again, err := h.a.AdmitKey(t.Context(), p, k, meaning, tc.intent); err != nil || !sameRecord(again, r) {
				t.Errorf("a denial's replay = %+v, %v; want the stored denial", again, err)
			}
		})
	}
	if h.committed() != (Budget{}) {
		t.Errorf("denials hold %+v", h.committed())
	}
	r := h.admitKey(p, "accounted")
	if r.Phase != PhasePrepared || r.Plan.Memory.Method != cgroup.MethodAccounting || r.Plan.CPU.Method != cgroup.MethodAccounting {
		t.Errorf("an accounted attempt on a cgroup v1 host = %s with plan %+v, want prepared and accounted", r.Phase, r.Plan)
	}
}

// Malformed requests change nothing and are told so.
func TestAdmitKeyRefusesMalformedRequests(t *testing.T) {
	h := consumerHarness(t)
	p := h.registerInstance("codespace-a", 200)
	zero := interactive
	zero.Requested.CPUMilli = 0
	badProfile := interactive
	badProfile.Profile = "a b"
	for _, tc := range []struct {
		name   string
		key    AttemptKey
		digest string
		intent Intent
	}{
		{"bad_attempt_id", AttemptKey{"codespace", "g1", "a/b"}, meaning, interactive},
		{"bad_digest", csKey("a"), strings.ToUpper(meaning), interactive},
		{"zero_quantity", csKey("a"), meaning, zero},
		{"bad_profile", csKey("a"), meaning, badProfile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.a.AdmitKey(t.Context(), p, tc.key, tc.digest, tc.intent)
			wantErr(t, "AdmitKey", err, ErrInvalidRequest)
		})
	}
	_, err := h.a.AdmitKey(t.Context(), h.ready(), csKey("a"), meaning, interactive)
	wantErr(t, "marshald's own owner", err, ErrUnauthorized)
}

// A restart keeps the instances: the same process registers again and
// finds its attempts; a principal of the earlier opening is refused, and
// another process cannot take the instance.
func TestInstancesOutliveARestart(t *testing.T) {
	h := consumerHarness(t)
	ctx := t.Context()
	old := h.registerInstance("codespace-a", 200)
	r := h.admitKey(old, "a-1")
	h.restart()
	_, err := h.a.Lookup(ctx, old, r.ID)
	wantErr(t, "a principal of the earlier opening", err, ErrUnauthorized)
	if _, ok := h.a.Registered("codespace", "g1", "codespace-a"); ok {
		t.Error("an instance not registered since the restart is found for its helper")
	}
	p := h.registerInstance("codespace-a", 200)
	if got, err := h.a.Lookup(ctx, p, r.ID); err != nil || got.Phase != PhasePrepared {
		t.Fatalf("Lookup after the restart = %s, %v; want prepared", got.Phase, err)
	}
	if reg, ok := h.a.Registered("codespace", "g1", "codespace-a"); !ok || reg != p {
		t.Errorf("Registered = %+v %v, want the new principal", reg, ok)
	}
	_, err = h.a.RegisterInstance(ctx, "codespace", "g1", "codespace-a", Peer{UID: 1000, PID: 300})
	wantErr(t, "another process after the restart", err, ErrAttemptConflict)

	// A consumer no longer served cannot act, though its instances stay.
	h.consumers = nil
	h.restart()
	_, err = h.a.RegisterInstance(ctx, "codespace", "g1", "codespace-a", Peer{UID: 1000, PID: 200})
	wantErr(t, "a consumer no longer served", err, ErrUnauthorized)
}

// A journal of schema 2 opens, and is schema 3 from then on, with its
// attempts.
func TestASchemaTwoJournalIsMadeThree(t *testing.T) {
	h := newHarness(t)
	r := h.prepare(h.ready(), key(1))
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	rewrite(t, h.path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketInstances); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(schemaWithoutInstances))
	})
	h.open()
	got, err := h.a.Lookup(t.Context(), h.ready(), r.ID)
	if err != nil || got.Phase != PhasePrepared {
		t.Fatalf("Lookup after the migration = %s, %v", got.Phase, err)
	}
	if err := h.view(func(tx *bolt.Tx) error {
		if s := string(tx.Bucket(bucketMeta).Get(keySchema)); s != SchemaVersion || tx.Bucket(bucketInstances) == nil {
			t.Errorf("schema %q, instances bucket %v; want %s with the bucket", s, tx.Bucket(bucketInstances) != nil, SchemaVersion)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// VerifyLaunch checks a helper's permit and changes nothing: a wrong
// permit, or an attempt whose launch was never begun, is unauthorized.
func TestVerifyLaunchChecksThePermitAlone(t *testing.T) {
	h := consumerHarness(t)
	ctx := t.Context()
	p := h.registerInstance("codespace-a", 200)
	r := h.admitKey(p, "v-1")
	_, err := h.a.VerifyLaunch(ctx, p, r.ID, newPermit())
	wantErr(t, "a prepared attempt", err, ErrUnauthorized)
	l, err := h.a.BeginLaunch(ctx, p, r.ID)
	if err != nil || l.Permit.IsZero() {
		t.Fatalf("BeginLaunch = %v", err)
	}
	before := h.commits()
	got, err := h.a.VerifyLaunch(ctx, p, r.ID, l.Permit)
	if err != nil || got.Phase != PhaseLaunchCommitted {
		t.Fatalf("VerifyLaunch = %s, %v; want the committed record", got.Phase, err)
	}
	_, err = h.a.VerifyLaunch(ctx, p, r.ID, newPermit())
	wantErr(t, "another permit", err, ErrUnauthorized)
	if h.commits() != before {
		t.Error("VerifyLaunch wrote to the journal")
	}
}
