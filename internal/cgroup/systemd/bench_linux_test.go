package systemd

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// BenchmarkCreateRemoveScope measures one scope's life through the
// manager, as the cgroupfs backend's BenchmarkCreateScope measures it
// through the tree: CreateScope of a live process (the transient unit
// started with its pid, the job waited for, the cgroup read back), the
// process moved back out, RemoveScope (the now empty unit stopped, or
// found already collected). One long-lived sleep is moved in and out on
// every iteration, so that no fork or exec is measured. For scale,
// `systemd-run --user --scope true` takes about 7 ms on the reference
// machine, most of it starting processes. create-ns/op is the part spent
// in CreateScope.
func BenchmarkCreateRemoveScope(b *testing.B) {
	for _, conn := range connections {
		b.Run(conn.name, func(b *testing.B) {
			m := requireManager(b)
			be := newBackend(b, conn.bus(m), Options{})
			sleeper := startChild(b, "exec sleep 600")
			pid := sleeper.PID()
			// Groups outside the manager's tree to move the process back
			// to, in every hierarchy the manager tracks it in.
			tree := testutil.NewCgroupTree(b)
			holds := []string{tree.V2("hold")}
			if mnt := be.mounts.V1["name=systemd"]; mnt != "" {
				holds = append(holds, filepath.Join(mnt, tree.Rel, "hold"))
			}
			for _, dir := range holds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			ctx := b.Context()
			var creating time.Duration
			for b.Loop() {
				start := time.Now()
				s, _, err := be.CreateScope(ctx, "bench", scope.NewID(), pid, cgroup.Limits{})
				creating += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				for _, dir := range holds {
					if err := cgroup.MoveProcess(cgroup.Host, dir, pid); err != nil {
						b.Fatal(err)
					}
				}
				if err := be.RemoveScope(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(creating.Nanoseconds())/float64(b.N), "create-ns/op")
		})
	}
}
