//go:build linux

package test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// BenchmarkEditToStatus times a manifest edit until the edited object's
// status, as `marshalctl get -w` streams it from the real marshald over
// its socket, observes the new generation: the save, the event, the load,
// the declaration, the reconcile and the status on the wire. Each edit is
// saved as an editor does: renamed over the old file (timed from the
// rename), its new version written aside either as most tools do
// (save=rename: ext4 then flushes the new data inside the rename, on the
// edit's clock) or made durable first, as vim's and emacs's atomic saves
// do (save=fsync-rename: the rename is the edit alone); or written in
// place (save=in-place: open with O_TRUNC, write, close). Edits follow
// each other as soon as the last one is observed. It reports the median
// and the 99th percentile in milliseconds, for a config dir of one object
// (a Profile) and of 10,000 (one Profile, 9,999 Workspaces, one of them
// edited), and the same from the save's return (after-save), and the
// save itself; before inotify's IN_CLOSE_WRITE was used, every edit
// waited out a 10 ms debounce (p50 12.8 ms, p99 14.8 ms with one object on
// a quiet machine).
func BenchmarkEditToStatus(b *testing.B) {
	if raceEnabled {
		b.Skip("times the daemon: run without -race")
	}
	for _, n := range []int{1, 10000} {
		for _, save := range []string{"rename", "fsync-rename", "in-place"} {
			b.Run(fmt.Sprintf("objects=%d/save=%s", n, save), func(b *testing.B) {
				benchEdit(b, n, save)
			})
		}
	}
}

func benchEdit(b *testing.B, n int, save string) {
	d := newDaemon(b)
	root := b.TempDir()
	// The edited object's kind and how many of that kind there are.
	kind, count, name, path := "profiles", 1, "coder", filepath.Join(d.config, "profile.yaml")
	content := func(i int) string { return profileYAML("coder", 1000+i%2) }
	if n == 1 {
		os.WriteFile(path, []byte(content(0)), 0o644)
	} else {
		writeManifests(b, d.config, n)
		kind, count, name, path = "workspaces", n-1, "ws-00007", filepath.Join(d.config, "team-07", "ws-00007.yaml")
		content = func(i int) string {
			return workspaceYAML("ws-00007", root, "coder") + fmt.Sprintf("  processes:\n    max_live: %d\n", 8+i%2)
		}
	}
	d.start()
	w := d.watch(kind)
	reconciled := func(gen int64) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range w.observed {
			if g != gen {
				return false
			}
		}
		return len(w.observed) == count
	}
	testutil.Eventually(b, w.wake, func() bool { return reconciled(1) }, "every object reconciled")

	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	gen := int64(1)
	lat := make([]time.Duration, 0, 1024)
	saving := make([]time.Duration, 0, 1024)
	after := make([]time.Duration, 0, 1024)
	for i := 0; b.Loop(); i++ {
		data := []byte(content(i + 1))
		var start time.Time
		var err error
		if save != "in-place" {
			// The editor writes the new version aside first; the edit
			// is the rename.
			if err = writeFile(tmp, data, save == "fsync-rename"); err == nil {
				start = time.Now()
				err = os.Rename(tmp, path)
			}
		} else {
			start = time.Now()
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
		saving = append(saving, time.Since(start))
		gen++
		testutil.Eventually(b, w.wake, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.observed[name] == gen
		}, "the edit observed")
		lat = append(lat, time.Since(start))
		after = append(after, lat[len(lat)-1]-saving[len(saving)-1])
	}
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	// What the save itself took, which the figures above include: on
	// ext4 a rename over a file or a truncated rewrite flushes data not
	// yet written first; a busy disk makes either wait.
	b.ReportMetric(ms(percentile(saving, 50)), "save-p50-ms")
	b.ReportMetric(ms(percentile(saving, 99)), "save-p99-ms")
	// From the save's return: what the edit costs the editor beyond its
	// own save (marshald often has the event before the rename returns).
	b.ReportMetric(ms(percentile(after, 50)), "after-save-p50-ms")
	b.ReportMetric(ms(percentile(after, 99)), "after-save-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// writeFile writes data to a new file at path, and makes it durable
// first when synced, as an editor's atomic save does before its rename.
func writeFile(path string, data []byte, synced bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil && synced {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
