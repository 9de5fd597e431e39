package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
)

// BenchmarkCreateScope measures one scope's life as the launch path lives
// it: CreateScope of a live process (mkdir, limits written and read back,
// the process moved in), the process moved back out, RemoveScope. One
// long-lived sleep is moved in and out on every iteration, so that no
// fork or exec is measured. The with_limits case sets all three limits,
// which on a hybrid host adds a group and a move in each v1 hierarchy.
func BenchmarkCreateScope(b *testing.B) {
	tests := []struct {
		name   string
		limits cgroup.Limits
	}{
		{name: "no_limits"},
		{name: "with_limits", limits: cgroup.Limits{CPUMilli: 500, MemoryBytes: 256 << 20, Tasks: 64}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			be, tree := newBackend(b)
			sleeper := startChild(b, nil, "sleep", "600")
			pid := sleeper.PID()
			// Holding groups inside the tree to move the process back to.
			holds := []string{tree.V2("hold")}
			for _, r := range cgroup.AllResources {
				if dir := be.v1(r, filepath.Join(tree.Rel, "hold")); dir != "" {
					holds = append(holds, dir)
				}
			}
			for _, dir := range holds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			ctx := b.Context()
			b.ResetTimer()
			for range b.N {
				s, _, err := be.CreateScope(ctx, "bench", scope.NewID(), pid, tc.limits)
				if err != nil {
					b.Fatal(err)
				}
				for i, dir := range holds {
					if i > 0 && tc.limits == (cgroup.Limits{}) {
						break // not moved in any v1 hierarchy
					}
					if err := cgroup.MoveProcess(cgroup.Host, dir, pid); err != nil {
						b.Fatal(err)
					}
				}
				if err := be.RemoveScope(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
