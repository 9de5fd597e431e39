package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// startBench runs c until the benchmark ends.
func startBench(b *testing.B, c *reconcile.Controller) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Start = %v", err)
		}
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkChangeToReconcile measures the latency from a change to the
// start of its Reconcile call, with 10,000 objects in the desired store
// (every one reconciled once before timing starts) and a Reconcile that
// reads its object from the store, as real ones do. "enqueue" starts at
// Controller.Enqueue; "store_set" at DesiredStore.Set of a new spec, through
// the store's handler.
func BenchmarkChangeToReconcile(b *testing.B) {
	const objects = 10_000
	for _, via := range []string{"enqueue", "store_set"} {
		b.Run(via, func(b *testing.B) {
			d := reconcile.NewDesiredStore()
			keys := make([]reconcile.Key, objects)
			for i := range keys {
				w := workspace(fmt.Sprintf("w%05d", i), "p")
				if _, err := d.Set(w); err != nil {
					b.Fatal(err)
				}
				keys[i] = reconcile.KeyOf(w)
			}
			var (
				reconciled atomic.Int64
				target     atomic.Pointer[reconcile.Key]
				hit        = make(chan time.Time, 1)
				warm       = make(chan struct{})
			)
			c, err := reconcile.NewController("bench", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				at := time.Now()
				if _, ok := d.Get(req.Key); !ok {
					return reconcile.Result{}, fmt.Errorf("%v missing", req.Key)
				}
				if reconciled.Add(1) == objects {
					close(warm)
				}
				if t := target.Load(); t != nil && *t == req.Key {
					hit <- at
				}
				return reconcile.Result{}, nil
			}), reconcile.Options{Workers: 2, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			d.OnChange(reconcile.EnqueueKey(c))
			for _, k := range keys {
				c.Enqueue(k)
			}
			startBench(b, c)
			<-warm

			lat := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				k := keys[(i*7919)%objects]
				target.Store(&k)
				var w *v1alpha1.Workspace
				if via == "store_set" {
					// A new spec each time, built before the clock starts.
					w = workspace(k.Name, fmt.Sprintf("p%d", i))
				}
				t0 := time.Now()
				if w != nil {
					if _, err := d.Set(w); err != nil {
						b.Fatal(err)
					}
				} else {
					c.Enqueue(k)
				}
				lat = append(lat, (<-hit).Sub(t0))
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkThroughput pushes b.N distinct keys through N workers with a
// Reconcile that does nothing: the engine's own cost per key.
func BenchmarkThroughput(b *testing.B) {
	for _, workers := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers_%d", workers), func(b *testing.B) {
			keys := make([]reconcile.Key, b.N)
			for i := range keys {
				keys[i] = reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: fmt.Sprintf("w%d", i)}
			}
			var n atomic.Int64
			all := make(chan struct{})
			total := int64(b.N)
			c, err := reconcile.NewController("bench", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				if n.Add(1) == total {
					close(all)
				}
				return reconcile.Result{}, nil
			}), reconcile.Options{Workers: workers, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			startBench(b, c)
			b.ResetTimer()
			start := time.Now()
			for _, k := range keys {
				c.Enqueue(k)
			}
			<-all
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
		})
	}
}

// BenchmarkDesiredStore measures the store's operations with 10,000
// Workspaces stored.
func BenchmarkDesiredStore(b *testing.B) {
	const objects = 10_000
	d := reconcile.NewDesiredStore()
	for i := range objects {
		if _, err := d.Set(workspace(fmt.Sprintf("w%05d", i), "p")); err != nil {
			b.Fatal(err)
		}
	}
	key := wkey("w05000")
	same := workspace("w05000", "p")
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, ok := d.Get(key); !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("set_unchanged", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Set(same); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set_changed", func(b *testing.B) {
		ws := [2]*v1alpha1.Workspace{workspace("w05000", "p"), workspace("w05000", "q")}
		for i := 0; b.Loop(); i++ {
			if _, err := d.Set(ws[i%2]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list_10000", func(b *testing.B) {
		for b.Loop() {
			if l := d.List(v1alpha1.KindWorkspace); len(l) != objects {
				b.Fatalf("listed %d", len(l))
			}
		}
	})
}
