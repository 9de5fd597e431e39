package pressure

import (
	"context"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func cgroup2(t *testing.T) string {
	t.Helper()
	m, err := cgroup.ReadMounts()
	if err != nil {
		t.Fatal(err)
	}
	return m.V2
}

func TestHostSamplerReadsThisHost(t *testing.T) {
	h := NewHostSampler(t.TempDir(), cgroup2(t))
	if h.MemoryPSI == "" || h.CPUPSI == "" {
		t.Skip("this kernel has no PSI")
	}
	s, err := h.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s.MemTotal <= 0 || s.MemAvailable <= 0 || s.DiskCapacity <= 0 || s.DiskAvailable <= 0 || s.invalid() {
		t.Fatalf("Sample() = %+v, want a valid sample", s)
	}
}

// The kernel accepts the daemon's triggers here, NUL-terminated as its
// documentation writes them: /proc/pressure's handler replaces the last
// byte written with a NUL, so an unterminated "some 150000 2000000"
// arrives as a 200 ms window, which it refuses.
func TestDefaultTriggersAreAccepted(t *testing.T) {
	tr, err := OpenTriggers(DefaultTriggerSpecs(cgroup2(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if len(tr.Accepted) != 2 {
		t.Fatalf("accepted on %v, want memory and cpu", tr.Accepted)
	}
}

// A real stall wakes the poller: CPU-bound children contend for the CPUs
// until the cpu trigger fires.
func TestTriggerFiresOnARealStall(t *testing.T) {
	tr, err := OpenTriggers([]TriggerSpec{{Files: psiFiles("cpu", cgroup2(t)), Kind: "some", Threshold: 100_000, Window: 2_000_000}})
	if err != nil {
		t.Skipf("no PSI trigger on this kernel: %v", err)
	}
	defer tr.Close()
	ctx, cancel := context.WithCancel(t.Context())
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, wake) }()
	for range 2 * runtime.NumCPU() {
		spin := exec.Command("sh", "-c", "while :; do :; done")
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	}
	select {
	case <-wake:
	case <-time.After(testutil.Deadline):
		t.Fatal("no trigger while the CPUs were contended")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil on cancellation", err)
	}
}

// The monitor on this host's real signals: event-driven, sampled, and
// closed again once stopped.
func TestHostMonitorRunsEventDriven(t *testing.T) {
	m := NewHostMonitor(t.TempDir(), cgroup2(t), nil)
	defer m.Close()
	armed := make(chan time.Duration, 16)
	m.onArm = func(d time.Duration) { armed <- d }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-armed:
	case <-time.After(testutil.Deadline):
		t.Fatal("the monitor did not sample")
	}
	if st := m.Status(time.Now()); st.Reason == ReasonNotSampled || st.Reason == ReasonSamplingFailed || !m.EventDriven() {
		t.Fatalf("status %+v event-driven %v, want a sampled status from PSI triggers", st, m.EventDriven())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := m.Status(time.Now()); st.Reason != ReasonStopped {
		t.Fatalf("after stopping = %+v, want monitor_stopped", st)
	}
}
