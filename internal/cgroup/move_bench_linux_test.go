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

// BenchmarkMove times the move of a process into a v2 group two ways,
// and reports the median of each in milliseconds: cold, after an idle
// time longer than a grace period, as a launch on a quiet machine moves
// its caller; and warm, right after another move. Every move takes one
// host-wide lock whose writer first waits out an RCU grace period unless
// a move took it within the last one: the difference is that wait, which
// every launch after a quiet moment pays, marshal's and systemd-run's
// alike.
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
	n := 0
	move := func() time.Duration {
		n++
		start := time.Now()
		if err := cgroup.MoveProcess(cgroup.Host, groups[n%2], proc.Process.Pid); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var cold, warm []time.Duration
	for b.Loop() {
		time.Sleep(testutil.QuietMoment)
		cold = append(cold, move())
		warm = append(warm, move())
	}
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(cold), "cold-ms")
	b.ReportMetric(med(warm), "warm-ms")
	b.ReportMetric(0, "ns/op")
}
