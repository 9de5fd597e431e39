//go:build linux

package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// procStat reads a process's CPU time, summed over its threads from
// schedstat (nanoseconds, where /proc/PID/stat counts 10 ms ticks), and
// its resident set.
func procStat(b *testing.B, pid int) (cpu time.Duration, rssKiB int64) {
	b.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(data)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			cpu += time.Duration(ns)
		}
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKiB, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return cpu, rssKiB
}

// BenchmarkIdleDaemon starts the real marshald on 10,000 manifests and
// reports its resident memory once ready and the CPU it uses while idle
// for 60 s (a minute of nothing happening: the only wake-ups left are the
// work queues' heartbeats and the relist).
func BenchmarkIdleDaemon(b *testing.B) {
	if raceEnabled {
		b.Skip("measures the daemon's memory and CPU: run without -race")
	}
	const idle = 60 * time.Second
	for range b.N {
		d := newDaemon(b)
		writeManifests(b, d.config, 10000)
		start := time.Now()
		d.start()
		ready := time.Since(start)
		// Idle means after the start-up reconcile: wait until every
		// workspace's status observes its generation.
		w := d.watch("workspaces")
		seen := 0
		defer func() {
			if b.Failed() {
				b.Logf("%d of 9999 workspaces seen reconciled", seen)
			}
		}()
		testutil.Eventually(b, w.wake, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			seen = 0
			for _, gen := range w.observed {
				if gen == 1 {
					seen++
				}
			}
			return seen == 9999
		}, "every workspace reconciled")
		reconciled := time.Since(start)
		w.cancel()
		<-w.done
		pid := d.cmd.Process.Pid
		cpu0, rss := procStat(b, pid)
		time.Sleep(idle) // the measurement itself: a minute of nothing
		cpu1, rssAfter := procStat(b, pid)
		d.stop()
		b.ReportMetric(float64(ready.Milliseconds()), "ready-ms")
		b.ReportMetric(float64(reconciled.Milliseconds()), "reconciled-ms")
		b.ReportMetric(float64(rss)/1024, "rss-MiB")
		b.ReportMetric(float64(rssAfter)/1024, "rss-idle-MiB")
		b.ReportMetric(100*float64(cpu1-cpu0)/float64(idle), "idle-cpu-%")
	}
}

func writeManifests(b *testing.B, dir string, n int) {
	b.Helper()
	os.WriteFile(filepath.Join(dir, "profile.yaml"), []byte(profileYAML("coder", 1000)), 0o644)
	root := b.TempDir()
	for i := range n - 1 {
		sub := filepath.Join(dir, fmt.Sprintf("team-%02d", i%50))
		os.MkdirAll(sub, 0o755)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("ws-%05d.yaml", i)), []byte(workspaceYAML(fmt.Sprintf("ws-%05d", i), root, "coder")), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
