//go:build linux

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/reconcile"
)

// benchDir writes a config dir of n objects: one profile and n-1
// workspaces, one per file, all Ready (their root is an existing dir).
func benchDir(b *testing.B, n int) (config, root string) {
	b.Helper()
	dir := b.TempDir()
	config, root = filepath.Join(dir, "manifests.d"), filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	os.MkdirAll(config, 0o755)
	os.WriteFile(filepath.Join(config, "profile.yaml"), []byte(
		"apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: coder\nspec:\n  limits:\n    tasks: 4096\n"), 0o644)
	for i := range n - 1 {
		sub := filepath.Join(config, fmt.Sprintf("team-%02d", i%50))
		os.MkdirAll(sub, 0o755)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("ws-%05d.yaml", i)), []byte(workspace(i, root, 8)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return config, root
}

func workspace(i int, root string, maxLive int) string {
	return fmt.Sprintf(`# A workspace of the benchmark.
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata:
  name: ws-%05d
  labels:
    team: team-%02d
spec:
  root: %s
  profile: coder
  exec:
    env:
      CI: "true"
  processes:
    max_live: %d
  resources:
    participation: optional
    request:
      cpu_milli: 100
`, i, i%50, root, maxLive)
}

// benchDaemon runs a daemon on config with the cgroupfs backend on a
// private subtree, until b ends.
func benchDaemon(b *testing.B, config string) *Daemon {
	b.Helper()
	tree := testutil.NewCgroupTree(b)
	dir := b.TempDir()
	cfg := Config{
		Mode: ModeSystem, ConfigDir: config, StateDir: filepath.Join(dir, "state"),
		Socket: filepath.Join(dir, "marshal.sock"), Backend: "cgroupfs", CgroupRoot: tree.Rel + "/marshal",
		LogFormat: "text", AllowGID: -1, Relist: time.Minute,
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	return d
}

// waitReconciled waits until every declared workspace's status observes
// its generation, waking on status changes.
func waitReconciled(b *testing.B, d *Daemon, wake <-chan struct{}) {
	b.Helper()
	testutil.Eventually(b, wake, func() bool {
		for _, obj := range d.stores.Desired.List("Workspace") {
			st, ok := d.stores.Workspaces.Get(reconcile.KeyOf(obj))
			if !ok || st.ObservedGeneration != obj.GetObjectMeta().Generation {
				return false
			}
		}
		return true
	}, "every workspace reconciled")
}

func signal(ch chan struct{}) func(reconcile.Key) {
	return func(reconcile.Key) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// BenchmarkFileChangeToStatus measures how long a manifest edit takes to
// show in the object's status: fsnotify, debounce, load, declare,
// reconcile, status. p50 and p99 over b.N edits.
func BenchmarkFileChangeToStatus(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			config, root := benchDir(b, n)
			d := benchDaemon(b, config)
			<-d.source.Synced()
			changed := make(chan struct{}, 1)
			d.stores.Workspaces.OnChange(signal(changed))
			waitReconciled(b, d, changed)

			target := controllers.WorkspaceKey("ws-00007")
			path := filepath.Join(config, "team-07", "ws-00007.yaml")
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				obj, _ := d.stores.Desired.Get(target)
				want := obj.GetObjectMeta().Generation + 1
				start := time.Now()
				if err := os.WriteFile(path, []byte(workspace(7, root, 9+i%2)), 0o644); err != nil {
					b.Fatal(err)
				}
				testutil.Eventually(b, changed, func() bool {
					st, _ := d.stores.Workspaces.Get(target)
					return st.ObservedGeneration == want
				}, "the edit reconciled")
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkStartup measures a first start on 10,000 manifests: to Ready
// (the config dir declared, READY=1 sent) and until every status is
// reconciled.
func BenchmarkStartup(b *testing.B) {
	config, _ := benchDir(b, 10000)
	var ready, reconciled []time.Duration
	for range b.N {
		start := time.Now()
		d := benchDaemon(b, config)
		changed := make(chan struct{}, 1)
		d.stores.Workspaces.OnChange(signal(changed))
		<-d.source.Synced()
		ready = append(ready, time.Since(start))
		waitReconciled(b, d, changed)
		reconciled = append(reconciled, time.Since(start))
	}
	b.ReportMetric(float64(median(ready).Milliseconds()), "ready-ms")
	b.ReportMetric(float64(median(reconciled).Milliseconds()), "reconciled-ms")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
