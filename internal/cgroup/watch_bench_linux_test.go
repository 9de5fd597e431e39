package cgroup_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// BenchmarkWatchLatency measures the time from the mkdir of a scope to the
// call of fn with its ScopeCreated, and reports the median and the 99th
// percentile. Each iteration also removes the scope and waits for its
// ScopeRemoved, untimed.
func BenchmarkWatchLatency(b *testing.B) {
	tree, dir := newTree(b)
	slice := mkdir(b, dir, scope.SliceName("bench"))

	type stamped struct {
		ev cgroup.Event
		at time.Time
	}
	events := make(chan stamped, 16)
	// fn stamps the time it is called: the latency is the watcher's, not
	// that of handing the event to another goroutine.
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() {
		done <- cgroup.WatchTree(ctx, tree.Mounts.V2, dir, func(ev cgroup.Event) {
			events <- stamped{ev, time.Now()}
		})
	}()
	b.Cleanup(func() {
		cancel()
		for {
			select {
			case <-events: // unblock a last fn
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					b.Errorf("WatchTree returned %v, want context.Canceled", err)
				}
				return
			}
		}
	})
	awaitEvent := func(name string, typ cgroup.EventType) time.Time {
		deadline := time.After(testutil.Deadline)
		for {
			select {
			case s := <-events:
				if s.ev.Scope.Name == name && s.ev.Type == typ {
					return s.at
				}
			case <-deadline:
				b.Fatalf("no %v for %s within %v", typ, name, testutil.Deadline)
			}
		}
	}
	// The watch has made its initial relist once it reports a scope made
	// after it started.
	first := scope.ScopeName("bench", scope.NewID())
	mkdir(b, slice, first)
	awaitEvent(first, cgroup.ScopeCreated)

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		name := scope.ScopeName("bench", scope.NewID())
		start := time.Now()
		mkdir(b, slice, name)
		lat = append(lat, awaitEvent(name, cgroup.ScopeCreated).Sub(start))
		b.StopTimer()
		if err := cgroup.RemoveGroup(cgroup.Host, filepath.Join(slice, name)); err != nil {
			b.Fatal(err)
		}
		awaitEvent(name, cgroup.ScopeRemoved)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}
