package controllers_test

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/reconcile"
)

// loaded returns a harness with one profile and n workspaces declared,
// all naming it and sharing one existing root.
func loaded(b *testing.B, n int) *harness {
	h := newHarness(b, controllers.HostKernel(b), harnessOptions{logger: slog.New(slog.DiscardHandler)})
	root := b.TempDir()
	h.declare(profile("coder", "", nil))
	for i := range n {
		h.declare(workspace(fmt.Sprintf("ws-%05d", i), root, "coder"))
	}
	return h
}

// changedTo returns a channel that receives each key of kind whose status
// store entry changes.
func changedTo[T any](s *reconcile.Store[T]) (<-chan reconcile.Key, func()) {
	ch := make(chan reconcile.Key, 1024)
	remove := s.OnChange(func(k reconcile.Key) {
		select {
		case ch <- k:
		default:
		}
	})
	return ch, remove
}

// reportLatencies reports the median and 99th percentile of d.
func reportLatencies(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// A workspace's spec changes (a new generation in the desired store) until
// its status shows that generation, with n workspaces loaded: the
// controllers' share of "file change → status reconciled".
func BenchmarkWorkspaceChangeToStatus(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			h := loaded(b, n)
			h.start()
			h.waitFor("every workspace reconciled", func() bool { return h.s.Workspaces.Len() == n })
			changed, remove := changedTo(h.s.Workspaces)
			defer remove()
			w := workspace("ws-00042", b.TempDir(), "coder")
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				w.Spec.Processes.MaxLive = ptr(int64(i%100 + 1))
				gen := int64(i + 2)
				start := time.Now()
				h.declare(w)
				for {
					k := <-changed
					if st, _ := h.s.Workspaces.Get(k); k.Name == w.Metadata.Name && st.ObservedGeneration == gen {
						break
					}
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportLatencies(b, lat)
		})
	}
}

// A profile's limits change until its status shows them read back from
// the real slice.
func BenchmarkProfileChangeToStatus(b *testing.B) {
	h := loaded(b, 0)
	h.requireKernel()
	h.start()
	key := controllers.ProfileKey("coder")
	h.waitFor("profile reconciled", func() bool { _, ok := h.s.Profiles.Get(key); return ok })
	changed, remove := changedTo(h.s.Profiles)
	defer remove()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		tasks := int64(100 + i%2)
		start := time.Now()
		h.declare(profile("coder", "", &v1alpha1.Limits{Tasks: &tasks}))
		for {
			<-changed
			if st, _ := h.s.Profiles.Get(key); len(st.Limits) == 1 && st.Limits[0].Applied == tasks {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// Start with 10,000 workspaces declared until every one has its status.
func BenchmarkStartup(b *testing.B) {
	const n = 10000
	for range b.N {
		b.StopTimer()
		h := loaded(b, n)
		done, remove := changedTo(h.s.Workspaces)
		b.StartTimer()
		stop := h.start()
		for h.s.Workspaces.Len() < n {
			<-done
		}
		b.StopTimer()
		remove()
		stop()
	}
}
