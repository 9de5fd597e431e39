package admission

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// DevGuard: only_proven_prelaunch_terminal_states_mean_not_started, and
// the charged set of AttemptPhase.
func TestPhasesChargedAndKnownNotStarted(t *testing.T) {
	charged := map[Phase]bool{PhasePrepared: true, PhaseLaunchCommitted: true, PhaseScopeBound: true,
		PhaseRunAuthorized: true, PhaseDraining: true, PhaseSuspect: true}
	notStarted := map[Phase]bool{PhaseDenied: true, PhaseCancelled: true, PhaseExpired: true}
	for _, p := range Phases {
		if p.Charged() != charged[p] || p.Terminal() == charged[p] || !p.Valid() {
			t.Errorf("%s: charged %v terminal %v valid %v", p, p.Charged(), p.Terminal(), p.Valid())
		}
		if got := (Record{Phase: p}).KnownNotStarted(); got != notStarted[p] {
			t.Errorf("%s: known not started = %v, want %v", p, got, notStarted[p])
		}
	}
	for _, r := range []ReleaseReason{ReleaseScopeTerminated, ReleasePreviousBoot} {
		if (Record{Phase: PhaseReleased, Release: r}).KnownNotStarted() {
			t.Errorf("released %s counts as known not started", r)
		}
	}
	if !(Record{Phase: PhaseReleased, Release: ReleaseNoHelperCreated}).KnownNotStarted() {
		t.Error("released no_helper_created does not count as known not started")
	}
	if Phase("running").Valid() || Phase("running").Terminal() {
		t.Error("an unknown phase is valid")
	}
}

// DevGuard: accounting_qos_and_kernel_claims_cannot_be_interchanged.
func TestPlanRefusesLevelsThatDoNotMatchTheirMethod(t *testing.T) {
	e := func(l v1alpha1.Level, m cgroup.Method) cgroup.Enforcement {
		return cgroup.Enforcement{Level: l, Method: m}
	}
	tests := []struct {
		name string
		caps cgroup.Capabilities
		ok   bool
	}{
		{"nothing_listed_is_accounted", cgroup.Capabilities{}, true},
		{"macos", macosCaps, true},
		{"hybrid_v1", kernelCaps, true},
		{"unified_v2", cgroup.Capabilities{cgroup.Memory: e(v1alpha1.LevelKernel, cgroup.MethodCgroupV2)}, true},
		{"qos_for_memory", cgroup.Capabilities{cgroup.Memory: e(v1alpha1.LevelCooperative, cgroup.MethodQoS)}, false},
		{"qos_claiming_kernel", cgroup.Capabilities{cgroup.CPU: e(v1alpha1.LevelKernel, cgroup.MethodQoS)}, false},
		{"accounting_claiming_kernel", cgroup.Capabilities{cgroup.PIDs: e(v1alpha1.LevelKernel, cgroup.MethodAccounting)}, false},
		{"cgroup_claiming_accounted", cgroup.Capabilities{cgroup.CPU: e(v1alpha1.LevelAccounted, cgroup.MethodCgroupV2)}, false},
		{"unknown_method", cgroup.Capabilities{cgroup.CPU: e(v1alpha1.LevelKernel, "ebpf")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PlanFrom(tc.caps)
			if (err == nil) != tc.ok {
				t.Fatalf("PlanFrom(%v) = %v, want ok %v", tc.caps, err, tc.ok)
			}
		})
	}
	p, _ := PlanFrom(macosCaps)
	for _, tc := range []struct {
		min  Levels
		want bool
	}{
		{Levels{v1alpha1.LevelCooperative, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}, true},
		{Levels{v1alpha1.LevelKernel, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}, false},
		{Levels{v1alpha1.LevelAccounted, v1alpha1.LevelKernel, v1alpha1.LevelAccounted}, false},
	} {
		if got := p.Satisfies(tc.min); got != tc.want {
			t.Errorf("macOS plan satisfies %+v = %v, want %v", tc.min, got, tc.want)
		}
	}
}

func TestPermitNeverFormatsItsSecret(t *testing.T) {
	p := newPermit()
	for _, s := range []string{p.String(), fmt.Sprint(p), fmt.Sprintf("%v %+v %#v %s %q %x", p, p, p, p, p, p)} {
		if len(s) == 0 || strings.Contains(s, p.Expose()) {
			t.Fatalf("formatted permit shows the secret: %s", s)
		}
	}
	back, err := ParsePermit(p.Expose())
	if err != nil || back != p || !back.matches(p.hash()) || newPermit().matches(p.hash()) {
		t.Fatalf("ParsePermit round trip: %v", err)
	}
	if _, err := ParsePermit("short"); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("ParsePermit(short) = %v, want %v", err, ErrInvalidRequest)
	}
	if (Permit{}).matches("") {
		t.Fatal("the zero permit matches an empty hash")
	}
}

func TestBudgetArithmetic(t *testing.T) {
	b := Budget{10, 20, 30}
	if got := b.RemainingAfter(Budget{11, 5, 30}); got != (Budget{0, 15, 0}) {
		t.Errorf("RemainingAfter = %+v, want {0 15 0}", got)
	}
	if got := (Budget{3, 5, 7}).Half(); got != (Budget{1, 2, 3}) {
		t.Errorf("Half = %+v, want {1 2 3}", got)
	}
	if (Budget{10, 21, 30}).Fits(b) || !b.Fits(b) {
		t.Error("Fits is wrong at the boundary")
	}
	// Any positive u64 may be asked for, as in DevGuard; only zero is
	// malformed.
	if (Budget{1, 0, 1}).validWorkload() || !(Budget{math.MaxUint64, 1, 1}).validWorkload() {
		t.Error("validWorkload bounds are wrong")
	}
	if got := (Budget{math.MaxUint64, 1, 2}).Amounts(); got.CPUMilli != math.MaxInt64 || got.Tasks != 2 {
		t.Errorf("Amounts = %+v, want the largest int64 for a quantity beyond it", got)
	}
	if got := addCapped(Budget{math.MaxUint64, 1, MaxQuantity}, Budget{1, 2, 1}); got != (Budget{MaxQuantity, 3, MaxQuantity}) {
		t.Errorf("addCapped = %+v, want it saturated at MaxQuantity", got)
	}
	if got := mulCapped(Budget{1 << 50, 3, 1 << 62}, 64); got != (Budget{MaxQuantity, 192, MaxQuantity}) {
		t.Errorf("mulCapped = %+v, want it saturated at MaxQuantity", got)
	}
}
