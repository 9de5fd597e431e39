package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	testclock "k8s.io/utils/clock/testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

const gib = 1 << 30

// fakeInspector stands in for /proc where a test must show what the real
// one cannot on demand: a reboot, a reused pid, an owner that died.
type fakeInspector struct {
	mu    sync.Mutex
	boot  string
	procs map[int]uint64
}

func newFakeInspector() *fakeInspector {
	return &fakeInspector{boot: "boot-a", procs: map[int]uint64{100: 50}}
}

func (f *fakeInspector) BootID() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boot, nil
}

func (f *fakeInspector) StartTime(pid int) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.procs[pid]
	if !ok {
		return 0, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	return s, nil
}

func (f *fakeInspector) set(pid int, start uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs[pid] = start
}

func (f *fakeInspector) kill(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.procs, pid)
}

// reboot starts a new boot in which no earlier process runs.
func (f *fakeInspector) reboot(boot string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boot = boot
	f.procs = map[int]uint64{100: 51}
}

// pressureBox is a pressure source a test sets.
type pressureBox struct {
	mu sync.Mutex
	s  pressure.Status
}

func (p *pressureBox) Status(time.Time) pressure.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s
}

func (p *pressureBox) set(l pressure.Level) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s = pressure.Status{Level: l, Reason: pressure.ReasonNone}
}

// kernelCaps is what a hybrid host's cgroupfs backend gives: cgroup v1
// limits on all three resources.
var kernelCaps = cgroup.Capabilities{
	cgroup.CPU:    {Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV1, Controller: "cpu.cfs_quota_us"},
	cgroup.Memory: {Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV1, Controller: "memory.limit_in_bytes"},
	cgroup.PIDs:   {Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV1, Controller: "pids.max"},
}

// macosCaps is DevGuard's macOS plan: cooperative cpu, accounted memory
// and tasks.
var macosCaps = cgroup.Capabilities{
	cgroup.CPU: {Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS},
}

// job is DevGuard's test job: 3 CPUs, 2 GiB, 64 tasks.
var job = Intent{
	Profile:   "coder",
	Requested: Budget{CPUMilli: 3000, MemoryBytes: 2 * gib, Tasks: 64},
	Minimum:   Levels{CPU: v1alpha1.LevelAccounted, Memory: v1alpha1.LevelAccounted, PIDs: v1alpha1.LevelAccounted},
}

// kernelJob is job asking for every resource at kernel level, so that its
// scope must carry the limits the plan calls for.
var kernelJob = Intent{
	Profile:   job.Profile,
	Requested: job.Requested,
	Minimum:   Levels{CPU: v1alpha1.LevelKernel, Memory: v1alpha1.LevelKernel, PIDs: v1alpha1.LevelKernel},
}

// DevGuard's test host leaves 7.5 CPUs, 23.25 GiB and 3584 tasks of work
// capacity: two requests fit, a third does not.
func devguardCapacity() *v1alpha1.Capacity {
	cpu, mem, tasks := int64(7500), int64(23*gib+gib/4), int64(3584)
	return &v1alpha1.Capacity{CPUMilli: &cpu, MemoryBytes: &mem, Tasks: &tasks}
}

func capacityOf(b Budget) *v1alpha1.Capacity {
	cpu, mem, tasks := int64(b.CPUMilli), int64(b.MemoryBytes), int64(b.Tasks)
	return &v1alpha1.Capacity{CPUMilli: &cpu, MemoryBytes: &mem, Tasks: &tasks}
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var meaning = digestOf("immutable command meaning")

func key(n int) string { return fmt.Sprintf("%032x", n) }

// storedRecords reads every attempt the journal holds, by ID, and the
// journal key of each.
func storedRecords(tx *bolt.Tx) (map[string]Record, map[string][]byte, error) {
	recs, keys := map[string]Record{}, map[string][]byte{}
	err := tx.Bucket(bucketAttempts).ForEach(func(k, v []byte) error {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		recs[r.ID], keys[r.ID] = r, slices.Clone(k)
		return nil
	})
	return recs, keys, err
}

// harness is an authority over a real journal in t.TempDir(), with a
// fake clock and a fake inspector, its writer running.
type harness struct {
	t        *testing.T
	path     string
	clock    *testclock.FakeClock
	insp     *fakeInspector
	pressure *pressureBox
	capacity *v1alpha1.Capacity
	caps     cgroup.Capabilities
	ttl      time.Duration
	maxSize  int
	// intent is what admit asks for: job, unless a test needs another.
	intent Intent
	// consumers are served, and profiles say which Profiles are
	// declared, once a test sets them.
	consumers []Consumer
	profiles  func(string) bool
	// uptime is the boot-relative clock consumers' records keep, in
	// nanoseconds.
	uptime atomic.Int64
	a      *Authority
	stop   func() error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessAt(t, filepath.Join(t.TempDir(), "admission.db"))
}

// newHarnessAt is newHarness with the journal at path.
func newHarnessAt(t *testing.T, path string) *harness {
	t.Helper()
	h := &harness{
		intent:   job,
		t:        t,
		path:     path,
		clock:    testclock.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)),
		insp:     newFakeInspector(),
		pressure: &pressureBox{s: pressure.Status{Level: pressure.Normal, Reason: pressure.ReasonNone}},
		capacity: devguardCapacity(),
		caps:     kernelCaps,
		ttl:      5 * time.Second,
	}
	if err := Create(h.path); err != nil {
		t.Fatal(err)
	}
	h.open()
	t.Cleanup(func() {
		if h.a != nil {
			if err := h.stop(); err != nil {
				t.Errorf("stopping authority: %v", err)
			}
		}
		checkConsistent(t, h.path)
	})
	return h
}

func (h *harness) options() Options {
	return Options{
		Clock:     h.clock,
		Inspector: h.insp,
		Pressure:  h.pressure,
		Measure:   func() (Machine, error) { return Machine{}, errors.New("no measuring in tests") },
		Profiles:  h.profiles,
		Uptime:    func() time.Duration { return time.Duration(h.uptime.Load()) },
		maxSize:   h.maxSize,
	}
}

// open opens the journal and starts the writer.
func (h *harness) open() {
	h.t.Helper()
	a, err := Open(h.path, h.options())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := a.SetHost(h.capacity, h.ttl); err != nil {
		h.t.Fatal(err)
	}
	if err := a.SetPlan(h.caps); err != nil {
		h.t.Fatal(err)
	}
	if err := a.SetConsumers(h.consumers, "rev-1"); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	h.a = a
	h.stop = func() error {
		cancel()
		err := <-done
		if cerr := a.Close(); err == nil {
			err = cerr
		}
		h.a = nil
		return err
	}
}

// restart stops the authority as a crash would leave it (nothing beyond
// the journal survives) and opens it again.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.stop(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

func (h *harness) register(owner string, gen uint64, pid int) Principal {
	h.t.Helper()
	p, err := h.a.Register(h.t.Context(), owner, gen, Peer{UID: 1000, PID: pid})
	if err != nil {
		h.t.Fatalf("Register(%q, %d, %d) = %v", owner, gen, pid, err)
	}
	return p
}

// ready registers the usual owner.
func (h *harness) ready() Principal { return h.register("runner", 1, 100) }

func (h *harness) admit(p Principal, id string) Record {
	h.t.Helper()
	r, err := h.a.Admit(h.t.Context(), p, id, meaning, h.intent)
	if err != nil {
		h.t.Fatalf("Admit(%s) = %v", id, err)
	}
	return r
}

func (h *harness) prepare(p Principal, id string) Record {
	h.t.Helper()
	r := h.admit(p, id)
	if r.Phase != PhasePrepared {
		h.t.Fatalf("Admit(%s) phase = %s (denial %s), want prepared", id, r.Phase, r.Denial)
	}
	return r
}

func (h *harness) begin(p Principal, id string) Permit {
	h.t.Helper()
	l, err := h.a.BeginLaunch(h.t.Context(), p, id)
	if err != nil || l.Permit.IsZero() {
		h.t.Fatalf("BeginLaunch(%s) = %+v, %v; want a permit", id, l.Record.Phase, err)
	}
	return l.Permit
}

// evidence is fresh read-back evidence of id's scope holding every limit
// of the kernel plan.
func (h *harness) evidence(id string, populated, exited bool) ScopeEvidence {
	enf := map[cgroup.Resource]cgroup.Enforcement{}
	for r, e := range kernelCaps {
		enf[r] = e
	}
	return ScopeEvidence{
		Name:          scope.ScopeName(job.Profile, id),
		ObservedAt:    h.clock.Now(),
		Exists:        true,
		Populated:     populated,
		ProcessExited: exited,
		Applied: cgroup.Applied{
			Limits:   cgroup.Limits{CPUMilli: int64(job.Requested.CPUMilli), MemoryBytes: int64(job.Requested.MemoryBytes), Tasks: int64(job.Requested.Tasks)},
			Enforced: enf,
		},
	}
}

// bound admits id, commits it and binds its scope.
func (h *harness) bound(p Principal, id string) (Record, Permit) {
	h.t.Helper()
	h.prepare(p, id)
	permit := h.begin(p, id)
	r, err := h.a.BindScope(h.t.Context(), p, id, permit, h.evidence(id, true, false))
	if err != nil {
		h.t.Fatalf("BindScope(%s) = %v", id, err)
	}
	return r, permit
}

func (h *harness) reconcile(id string, ev ScopeEvidence) Record {
	h.t.Helper()
	r, err := h.a.Reconcile(h.t.Context(), id, ev)
	if err != nil {
		h.t.Fatalf("Reconcile(%s) = %v", id, err)
	}
	return r
}

func (h *harness) lookup(p Principal, id string) Record {
	h.t.Helper()
	r, err := h.a.Lookup(h.t.Context(), p, id)
	if err != nil {
		h.t.Fatalf("Lookup(%s) = %v", id, err)
	}
	return r
}

func (h *harness) committed() Budget { return h.a.Snapshot().Committed }

// commits counts the durable commits so far: it moves only when
// something was written.
func (h *harness) commits() int { return int(h.a.commits.Load()) }

// idle returns once the writer has done what it was doing, taking up the
// log between batches among it.
func (h *harness) idle() {
	h.t.Helper()
	if err := h.onWriter(func(*batch) {}); err != nil {
		h.t.Fatal(err)
	}
}

// onWriter runs fn as a request of its own on the writer.
func (h *harness) onWriter(fn func(*batch)) error {
	_, err := h.a.do(h.t.Context(), h.clock.Now(), func(b *batch) (any, error) { fn(b); return nil, nil })
	return err
}

// view reads the journal file once the writer has brought it up to date
// with its log.
func (h *harness) view(fn func(*bolt.Tx) error) error {
	if err := h.onWriter(func(b *batch) { b.checkpoint = true }); err != nil {
		return err
	}
	return h.a.db.View(fn)
}

// journalTxid is the journal file's last committed bbolt transaction.
func (h *harness) journalTxid() int {
	h.t.Helper()
	var id int
	if err := h.a.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// checkConsistent opens the journal read-only and runs Open's checks:
// bbolt's consistency, every record, the charged index and its totals.
func checkConsistent(t interface {
	Helper()
	Errorf(string, ...any)
}, path string) {
	t.Helper()
	// A copy, replayed as Open replays it: the journal as the next
	// start will find it, the original left as it is.
	dir, err := os.MkdirTemp("", "journal-check-")
	if err != nil {
		t.Errorf("copying journal to check it: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	cp := filepath.Join(dir, "admission.db")
	data, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(cp, data, 0o600)
	}
	if err == nil {
		data, err = readLog(path + walSuffix)
	}
	if err == nil && data != nil {
		err = os.WriteFile(cp+walSuffix, data, 0o600)
	}
	if err != nil {
		t.Errorf("copying journal to check it: %v", err)
		return
	}
	db, l, err := openBolt(cp, time.Second, 0, "any-boot")
	if err != nil {
		t.Errorf("journal is not consistent: %v", err)
		return
	}
	defer db.Close()
	if _, _, err := resumeLog(db, cp+walSuffix, l, "any-boot"); err != nil {
		t.Errorf("journal's log does not replay: %v", err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v, want %v", what, err, want)
	}
}
