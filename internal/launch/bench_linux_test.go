package launch

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// BenchmarkLaunchPath times the daemon's side of one launch at once
// (Launcher.Launch, as marshalctl run asks for it), on the real parts (journal and state database on disk, the
// cgroupfs backend, a real caller moved into its scope), without the
// processes' start and exec: what marshald adds to a launch. Each
// iteration's caller is started, and its launch settled and forgotten,
// off the clock.
func BenchmarkLaunchPath(b *testing.B) {
	for _, p := range []v1alpha1.Participation{v1alpha1.ParticipationNone, v1alpha1.ParticipationRequired} {
		b.Run(string(p), func(b *testing.B) {
			h := newHarness(b)
			h.workspace("web", p, 1)
			h.start()
			req := h.request("web")
			var total time.Duration
			for range b.N {
				b.StopTimer()
				cmd := exec.Command("sleep", "600")
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				caller, err := Pin(cmd.Process.Pid, uint32(os.Getuid()), 0)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				plan, err := h.l.Launch(b.Context(), req, caller)
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				b.StopTimer()
				cmd.Process.Kill()
				cmd.Wait()
				h.settle(plan)
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/launch")

		})
	}
}
