package cgroup_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// BenchmarkMove times the move of a process into a v2 group three ways,
// and reports the median of each in milliseconds: cold, after an idle
// time longer than a grace period (a launch on a quiet machine); warm,
// right after another move; and primed, cold but with PrimeMove called a
// millisecond before the move (what a launch does between its request's
// arrival and its move). What primed saves on cold is what the launch
// path hides behind its own work.
func BenchmarkMove(b *testing.B) {
	tree := testutil.NewCgroupTree(b)
	groups := [2]string{filepath.Join(tree.V2(), "a"), filepath.Join(tree.V2(), "b")}
	for _, g := range groups {
		if err := os.Mkdir(g, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	proc := exec.Command("sleep", "infinity")
	if err := proc.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		proc.Process.Kill()
		proc.Wait()
	})
	// Longer than a grace period on any kernel configuration: the lock's
	// wait is back to its start.
	const idle = 60 * time.Millisecond
	// The launch's work between its request's arrival and its move.
	const work = time.Millisecond
	n := 0
	move := func() time.Duration {
		n++
		start := time.Now()
		if err := cgroup.MoveProcess(groups[n%2], proc.Process.Pid); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var cold, warm, primed []time.Duration
	for b.Loop() {
		time.Sleep(idle)
		cold = append(cold, move())
		warm = append(warm, move())
		time.Sleep(idle)
		done := make(chan error, 1)
		go func() { done <- cgroup.PrimeMove(groups[0]) }()
		time.Sleep(work)
		primed = append(primed, move())
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(cold), "cold-ms")
	b.ReportMetric(med(warm), "warm-ms")
	b.ReportMetric(med(primed), "primed-ms")
	b.ReportMetric(med(cold)-med(primed), "primed-saves-ms")
	b.ReportMetric(0, "ns/op")
}
