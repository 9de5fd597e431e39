package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// The model: what the contract says, written as plainly as possible and
// apart from the implementation. The property test drives both with the
// same random operations, restarts and reboots included, and requires
// the same answer to every request and the same charged totals.

type mProc struct {
	pid   int
	start uint64
	boot  string
}

type mOwner struct {
	gen  uint64
	proc mProc
}

type mAttempt struct {
	owner     string
	gen       uint64
	ownerProc mProc
	fp        string
	phase     Phase
	denial    Denial
	release   ReleaseReason
	deadline  time.Time
	q         Budget
	boot      string
	scope     bool
	root      mProc
	oom, lost bool
	permit    bool // a permit was issued
}

type model struct {
	boot     string
	now      time.Time
	level    pressure.Level
	procs    map[int]uint64 // running processes: pid → start time
	owners   map[string]mOwner
	attempts map[string]*mAttempt
	epoch    int
	capacity Budget
	ttl      time.Duration
}

// mPrincipal is what the test holds after a registration.
type mPrincipal struct {
	owner string
	gen   uint64
	proc  mProc
	epoch int
	p     Principal
}

func (m *model) valid(p mPrincipal) bool {
	o, ok := m.owners[p.owner]
	return p.epoch == m.epoch && ok && o.gen == p.gen && o.proc == p.proc
}

func (m *model) alive(pr mProc) bool {
	s, ok := m.procs[pr.pid]
	return ok && s == pr.start && pr.boot == m.boot
}

// expire applies the deadline to every prepared attempt.
func (m *model) expire() {
	for _, a := range m.attempts {
		if a.phase == PhasePrepared && !m.now.Before(a.deadline) {
			a.phase = PhaseExpired
		}
	}
}

func (m *model) committed() (Budget, int) {
	var b Budget
	n := 0
	for _, a := range m.attempts {
		if a.phase.Charged() {
			b = b.Add(a.q)
			n++
		}
	}
	return b, n
}

// answer is what a request returned, reduced to what the contract fixes.
type answer struct {
	err     string
	phase   Phase
	denial  Denial
	release ReleaseReason
	permit  bool
	mayExec bool
	oom     bool
}

func errKind(err error) string {
	for _, e := range []error{ErrUnauthorized, ErrNotFound, ErrAttemptConflict, ErrInvalidTransition, ErrEvidence, ErrUnavailable, ErrInvalidRequest} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "unexpected: " + err.Error()
	}
	return ""
}

func fromRecord(r Record, err error) answer {
	if err != nil {
		return answer{err: errKind(err)}
	}
	return answer{phase: r.Phase, denial: r.Denial, release: r.Release, oom: r.OOMKilled}
}

func fromAttempt(a *mAttempt) answer {
	return answer{phase: a.phase, denial: a.denial, release: a.release, oom: a.oom}
}

func fail(e error) answer { return answer{err: e.Error()} }

// modelSUT is the authority under test, with the parts the test drives.
type modelSUT struct {
	path     string
	clock    *testclock.FakeClock
	insp     *fakeInspector
	pressure *pressureBox
	a        *Authority
	stop     func()
}

var modelIntents = []Intent{
	{Profile: "coder", Requested: Budget{1000, gib, 32}, Minimum: Levels{v1alpha1.LevelAccounted, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}},
	{Profile: "coder", Requested: Budget{3000, 2 * gib, 64}, Minimum: Levels{v1alpha1.LevelCooperative, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}},
	{Profile: "coder", Requested: Budget{1000, gib, 32}, Minimum: Levels{v1alpha1.LevelKernel, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}},
}

var modelDigests = []string{digestOf("one"), digestOf("two")}

// macosEvidence is read-back evidence of the macOS plan on id's scope.
func macosEvidence(id string, at time.Time) ScopeEvidence {
	return ScopeEvidence{
		Name: scope.ScopeName("coder", id), ObservedAt: at, Exists: true, Populated: true,
		Applied: cgroup.Applied{Enforced: map[cgroup.Resource]cgroup.Enforcement{cgroup.CPU: macosCaps[cgroup.CPU]}},
	}
}

func TestModelAgreesOnEveryAnswerAndOnChargedTotals(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "admission-model-")
		if err != nil {
			rt.Fatal(err)
		}
		rt.Cleanup(func() { os.RemoveAll(dir) })
		start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		m := &model{
			boot: "boot-a", now: start, level: pressure.Normal,
			procs:    map[int]uint64{100: 50, 200: 60},
			owners:   map[string]mOwner{},
			attempts: map[string]*mAttempt{},
			capacity: Budget{7000, 8 * gib, 512},
			ttl:      5 * time.Second,
		}
		s := &modelSUT{
			path:     filepath.Join(dir, "admission.db"),
			clock:    testclock.NewFakeClock(start),
			insp:     &fakeInspector{boot: "boot-a", procs: map[int]uint64{100: 50, 200: 60}},
			pressure: &pressureBox{s: pressure.Status{Level: pressure.Normal}},
		}
		if err := Create(s.path); err != nil {
			rt.Fatal(err)
		}
		open := func() {
			a, err := Open(s.path, Options{Clock: s.clock, Inspector: s.insp, Pressure: s.pressure})
			if err != nil {
				rt.Fatalf("Open: %v", err)
			}
			if err := a.SetHost(capacityOf(m.capacity), m.ttl); err != nil {
				rt.Fatal(err)
			}
			if err := a.SetPlan(macosCaps); err != nil {
				rt.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			s.a = a
			s.stop = func() {
				cancel()
				if err := <-done; err != nil {
					rt.Fatalf("Run: %v", err)
				}
				a.Close()
			}
		}
		open()
		rt.Cleanup(func() { s.stop(); checkConsistent(rt, s.path) })

		var principals []mPrincipal
		permits := map[string]Permit{}
		keys := []string{key(1), key(2), key(3), key(4), key(5)}
		ctx := context.Background()
		check := func(what string, got, want answer) {
			if got != want {
				rt.Fatalf("%s = %+v, model says %+v", what, got, want)
			}
		}
		// pickPrincipal mostly takes a principal that is still valid, so
		// that sequences reach deep phases; sometimes any, stale included.
		pickPrincipal := func(rt *rapid.T) (mPrincipal, bool) {
			if len(principals) == 0 {
				return mPrincipal{}, false
			}
			var valid []mPrincipal
			for _, p := range principals {
				if m.valid(p) {
					valid = append(valid, p)
				}
			}
			if len(valid) > 0 && rapid.IntRange(0, 3).Draw(rt, "valid principal") > 0 {
				return rapid.SampledFrom(valid).Draw(rt, "principal"), true
			}
			return rapid.SampledFrom(principals).Draw(rt, "principal"), true
		}
		// pickKey mostly takes a key of an attempt p owns, so that
		// sequences follow one attempt through its phases.
		pickKey := func(rt *rapid.T, p mPrincipal) string {
			var mine []string
			for _, id := range keys {
				if a, ok := m.attempts[id]; ok && a.owner == p.owner && a.gen == p.gen {
					mine = append(mine, id)
				}
			}
			if len(mine) > 0 && rapid.IntRange(0, 3).Draw(rt, "own key") > 0 {
				return rapid.SampledFrom(mine).Draw(rt, "key")
			}
			return rapid.SampledFrom(keys).Draw(rt, "key")
		}
		// owned is the model's lookup of p's attempt id, after the
		// authority's checks of p, in their order.
		owned := func(p mPrincipal, id string) (*mAttempt, error) {
			if !m.valid(p) {
				return nil, ErrUnauthorized
			}
			a, ok := m.attempts[id]
			if !ok || a.owner != p.owner || a.gen != p.gen {
				return nil, ErrNotFound
			}
			return a, nil
		}

		for _, o := range []struct {
			name string
			pid  int
		}{{"a", 100}, {"b", 200}} {
			p, err := s.a.Register(ctx, o.name, 1, Peer{UID: 1000, PID: o.pid})
			if err != nil {
				rt.Fatal(err)
			}
			proc := mProc{o.pid, m.procs[o.pid], m.boot}
			m.owners[o.name] = mOwner{1, proc}
			principals = append(principals, mPrincipal{o.name, 1, proc, m.epoch, p})
		}
		// reconnect registers every owner again whose process still runs,
		// as clients do after the daemon restarted; after a reboot, the
		// owner's new process registers the next generation.
		reconnect := func() {
			for _, name := range []string{"a", "b"} {
				o, ok := m.owners[name]
				if !ok {
					continue
				}
				if o.proc.boot != m.boot {
					start, running := m.procs[o.proc.pid]
					if !running {
						continue
					}
					o = mOwner{o.gen + 1, mProc{o.proc.pid, start, m.boot}}
				}
				if !m.alive(o.proc) {
					continue
				}
				p, err := s.a.Register(ctx, name, o.gen, Peer{UID: 1000, PID: o.proc.pid})
				if err != nil {
					rt.Fatalf("re-registering %s: %v", name, err)
				}
				m.owners[name] = o
				principals = append(principals, mPrincipal{name, o.gen, o.proc, m.epoch, p})
			}
		}
		actions := map[string]func(*rapid.T){
			"register": func(rt *rapid.T) {
				owner := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "owner")
				pid := rapid.SampledFrom([]int{100, 200, 300}).Draw(rt, "pid")
				gen := uint64(rapid.IntRange(1, 4).Draw(rt, "gen"))
				if cur, ok := m.owners[owner]; ok && rapid.IntRange(0, 2).Draw(rt, "same process") > 0 {
					// Mostly the owner's own process again, at its
					// generation or the next.
					pid = cur.proc.pid
					gen = cur.gen + uint64(rapid.IntRange(0, 1).Draw(rt, "next generation"))
				}
				p, err := s.a.Register(ctx, owner, gen, Peer{UID: 1000, PID: pid})
				m.expire()
				start, running := m.procs[pid]
				proc := mProc{pid, start, m.boot}
				cur, known := m.owners[owner]
				var want error
				switch {
				case !running:
					want = ErrUnauthorized
				case known && (gen < cur.gen || gen == cur.gen && cur.proc != proc):
					want = ErrUnauthorized
				}
				if want != nil {
					check("Register", answer{err: errKind(err)}, fail(want))
					return
				}
				check("Register", answer{err: errKind(err)}, answer{})
				m.owners[owner] = mOwner{gen, proc}
				principals = append(principals, mPrincipal{owner, gen, proc, m.epoch, p})
			},
			"admit": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := rapid.SampledFrom(keys).Draw(rt, "key")
				in := rapid.SampledFrom(modelIntents).Draw(rt, "intent")
				dg := rapid.SampledFrom(modelDigests).Draw(rt, "digest")
				r, err := s.a.Admit(ctx, p.p, id, dg, in)
				m.expire()
				fp, _ := Fingerprint(dg, in)
				var want answer
				a, exists := m.attempts[id]
				switch {
				case !m.valid(p):
					want = fail(ErrUnauthorized)
				case exists && (a.fp != fp || a.owner != p.owner || a.gen != p.gen):
					want = fail(ErrAttemptConflict)
				case exists:
					want = fromAttempt(a)
				default:
					a = &mAttempt{owner: p.owner, gen: p.gen, ownerProc: p.proc, fp: fp, q: in.Requested, boot: m.boot}
					used, _ := m.committed()
					target := m.capacity
					switch m.level {
					case pressure.Constrained:
						target = target.Half()
					case pressure.Critical:
						target = Budget{}
					}
					switch {
					case in.Minimum.CPU == v1alpha1.LevelKernel:
						a.phase, a.denial = PhaseDenied, DenialPolicyUnsupported
					case !in.Requested.Fits(target.RemainingAfter(used)):
						a.phase, a.denial = PhaseDenied, DenialResourceUnavailable
					default:
						a.phase, a.deadline = PhasePrepared, m.now.Add(m.ttl)
					}
					m.attempts[id] = a
					want = fromAttempt(a)
				}
				check("Admit", fromRecord(r, err), want)
			},
			"begin": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := pickKey(rt, p)
				l, err := s.a.BeginLaunch(ctx, p.p, id)
				m.expire()
				got := fromRecord(l.Record, err)
				got.permit = !l.Permit.IsZero()
				a, merr := owned(p, id)
				if merr != nil {
					check("BeginLaunch", got, fail(merr))
					return
				}
				want := fromAttempt(a)
				if a.phase == PhasePrepared {
					a.phase, a.permit = PhaseLaunchCommitted, true
					want = fromAttempt(a)
					want.permit = true
					permits[id] = l.Permit
				}
				check("BeginLaunch", got, want)
			},
			"bind": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := pickKey(rt, p)
				permit, have := permits[id]
				if !have || rapid.IntRange(0, 9).Draw(rt, "wrong permit") == 0 {
					permit = newPermit()
				}
				r, err := s.a.BindScope(ctx, p.p, id, permit, macosEvidence(id, s.clock.Now()))
				m.expire()
				if !m.alive(p.proc) {
					check("BindScope", fromRecord(r, err), fail(ErrUnauthorized))
					return
				}
				a, merr := owned(p, id)
				switch {
				case merr != nil:
					check("BindScope", fromRecord(r, err), fail(merr))
				case !a.permit || permit != permits[id]:
					check("BindScope", fromRecord(r, err), fail(ErrUnauthorized))
				case a.phase == PhaseScopeBound:
					check("BindScope", fromRecord(r, err), fromAttempt(a))
				case a.phase != PhaseLaunchCommitted || a.scope:
					check("BindScope", fromRecord(r, err), fail(ErrInvalidTransition))
				default:
					a.phase, a.scope, a.root = PhaseScopeBound, true, p.proc
					check("BindScope", fromRecord(r, err), fromAttempt(a))
				}
			},
			"authorize": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := pickKey(rt, p)
				permit, have := permits[id]
				if !have {
					permit = newPermit()
				}
				run, err := s.a.AuthorizeRun(ctx, p.p, id, permit)
				m.expire()
				got := fromRecord(run.Record, err)
				got.mayExec = run.MayExec
				if !m.alive(p.proc) {
					check("AuthorizeRun", got, fail(ErrUnauthorized))
					return
				}
				a, merr := owned(p, id)
				switch {
				case merr != nil:
					check("AuthorizeRun", got, fail(merr))
				case !a.permit || !have:
					check("AuthorizeRun", got, fail(ErrUnauthorized))
				case a.phase != PhaseScopeBound && a.phase != PhaseRunAuthorized:
					check("AuthorizeRun", got, fail(ErrInvalidTransition))
				case a.root != p.proc && !m.alive(a.root):
					check("AuthorizeRun", got, fail(ErrUnauthorized))
				case a.phase == PhaseRunAuthorized:
					check("AuthorizeRun", got, fromAttempt(a))
				default:
					a.phase = PhaseRunAuthorized
					want := fromAttempt(a)
					want.mayExec = true
					check("AuthorizeRun", got, want)
				}
			},
			"abandon": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := pickKey(rt, p)
				r, err := s.a.AbandonLaunch(ctx, p.p, id, AbandonSpawnFailed)
				m.expire()
				a, merr := owned(p, id)
				switch {
				case merr != nil:
					check("AbandonLaunch", fromRecord(r, err), fail(merr))
				case a.phase.Terminal():
					check("AbandonLaunch", fromRecord(r, err), fromAttempt(a))
				case a.scope || a.phase == PhasePrepared || a.phase == PhaseScopeBound || a.phase == PhaseRunAuthorized:
					check("AbandonLaunch", fromRecord(r, err), fail(ErrInvalidTransition))
				default:
					a.phase, a.release = PhaseReleased, ReleaseNoHelperCreated
					check("AbandonLaunch", fromRecord(r, err), fromAttempt(a))
				}
			},
			"cancel": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := pickKey(rt, p)
				r, err := s.a.Cancel(ctx, p.p, id)
				m.expire()
				a, merr := owned(p, id)
				if merr != nil {
					check("Cancel", fromRecord(r, err), fail(merr))
					return
				}
				switch a.phase {
				case PhasePrepared:
					a.phase = PhaseCancelled
				case PhaseLaunchCommitted, PhaseScopeBound, PhaseRunAuthorized:
					a.phase = PhaseDraining
				}
				check("Cancel", fromRecord(r, err), fromAttempt(a))
			},
			"lookup": func(rt *rapid.T) {
				p, ok := pickPrincipal(rt)
				if !ok {
					rt.Skip("no principal yet")
				}
				id := pickKey(rt, p)
				r, err := s.a.Lookup(ctx, p.p, id)
				m.expire()
				a, merr := owned(p, id)
				if merr != nil {
					check("Lookup", fromRecord(r, err), fail(merr))
					return
				}
				check("Lookup", fromRecord(r, err), fromAttempt(a))
			},
			"reconcile": func(rt *rapid.T) {
				id := rapid.SampledFrom(keys).Draw(rt, "key")
				ev := macosEvidence(id, s.clock.Now())
				ev.Exists = rapid.IntRange(0, 4).Draw(rt, "exists") > 0
				ev.Populated = rapid.Bool().Draw(rt, "populated")
				ev.ProcessExited = rapid.Bool().Draw(rt, "exited")
				ev.OOMKilled = rapid.IntRange(0, 5).Draw(rt, "oom") == 0
				r, err := s.a.Reconcile(ctx, id, ev)
				m.expire()
				a, ok := m.attempts[id]
				if !ok {
					check("Reconcile", fromRecord(r, err), fail(ErrNotFound))
					return
				}
				if a.phase.Charged() && a.phase != PhasePrepared {
					terminated := ev.Exists && !ev.Populated && ev.ProcessExited
					if ev.Exists && ev.OOMKilled {
						a.oom = true
					}
					switch {
					case a.scope && !ev.Exists:
						a.phase, a.lost = PhaseSuspect, true
					case a.scope && terminated && !a.lost:
						a.phase, a.release = PhaseReleased, ReleaseScopeTerminated
					case !a.scope && ev.Exists:
						a.scope, a.phase = true, PhaseSuspect
						if terminated {
							a.phase, a.release = PhaseReleased, ReleaseScopeTerminated
						}
					case !a.scope && a.phase != PhaseSuspect && !m.alive(a.ownerProc):
						a.phase = PhaseSuspect
					}
				}
				check("Reconcile", fromRecord(r, err), fromAttempt(a))
			},
			"advance_clock": func(rt *rapid.T) {
				d := time.Duration(rapid.IntRange(0, 3000).Draw(rt, "ms")) * time.Millisecond
				changed := s.a.Changed()
				before, _ := m.committed()
				s.clock.Step(d)
				m.now = m.now.Add(d)
				m.expire()
				if after, _ := m.committed(); after != before {
					// The writer's timer expires them on its own: wait
					// for that commit.
					select {
					case <-changed:
					case <-time.After(10 * time.Second):
						rt.Fatal("no expiry commit after the deadline passed")
					}
				}
			},
			"set_pressure": func(rt *rapid.T) {
				l := rapid.SampledFrom([]pressure.Level{pressure.Normal, pressure.Normal, pressure.Normal, pressure.Constrained, pressure.Critical}).Draw(rt, "level")
				s.pressure.set(l)
				m.level = l
			},
			"process_exits_or_pid_is_reused": func(rt *rapid.T) {
				if rapid.IntRange(0, 3).Draw(rt, "rarely") > 0 {
					return
				}
				pid := rapid.SampledFrom([]int{100, 200, 300}).Draw(rt, "pid")
				if rapid.Bool().Draw(rt, "reuse") {
					start := uint64(rapid.IntRange(70, 90).Draw(rt, "start"))
					s.insp.set(pid, start)
					m.procs[pid] = start
				} else {
					s.insp.kill(pid)
					delete(m.procs, pid)
				}
			},
			"restart": func(rt *rapid.T) {
				if rapid.IntRange(0, 2).Draw(rt, "rarely") > 0 {
					return
				}
				s.stop()
				open()
				m.epoch++
				for _, a := range m.attempts {
					if a.phase.Charged() && a.phase != PhasePrepared {
						a.phase = PhaseSuspect
					}
				}
				reconnect()
			},
			"reboot": func(rt *rapid.T) {
				if rapid.IntRange(0, 4).Draw(rt, "rarely") > 0 {
					return
				}
				s.stop()
				boot := fmt.Sprintf("boot-%d", m.epoch+1)
				s.insp.reboot(boot)
				s.insp.set(200, 61)
				open()
				m.epoch++
				m.boot = boot
				m.procs = map[int]uint64{100: 51, 200: 61}
				for _, a := range m.attempts {
					switch {
					case a.phase == PhasePrepared:
						a.phase = PhaseExpired
					case a.phase.Charged():
						a.phase, a.release = PhaseReleased, ReleasePreviousBoot
					}
				}
				reconnect()
			},
		}
		invariant := func(rt *rapid.T) {
			want, n := m.committed()
			snap := s.a.Snapshot()
			if snap.Committed != want || snap.Charged != n {
				phases := []string{}
				for id, a := range m.attempts {
					phases = append(phases, id[28:]+":"+string(a.phase))
				}
				slices.Sort(phases)
				rt.Fatalf("charged %+v over %d, model says %+v over %d (%v)", snap.Committed, snap.Charged, want, n, phases)
			}
		}
		names := slices.Sorted(maps.Keys(actions))
		steps := 150
		if testing.Short() {
			steps = 50
		}
		for range steps {
			actions[rapid.SampledFrom(names).Draw(rt, "action")](rt)
			invariant(rt)
		}
	})
}
