package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/scope"
)

// fsyncP50 measures this disk: the median of n 4 KiB writes, each made
// durable with fdatasync, in dir.
func fsyncP50(b *testing.B, dir string, n int) time.Duration {
	b.Helper()
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	return p50(lat)
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// benchAuthority opens a fresh journal in dir with room for any number of
// admissions and starts its writer.
func benchAuthority(b *testing.B, dir string) (*Authority, Principal) {
	b.Helper()
	path := filepath.Join(dir, fmt.Sprintf("bench-%d.db", time.Now().UnixNano()))
	if err := Create(path); err != nil {
		b.Fatal(err)
	}
	a, err := Open(path, Options{
		Inspector: newFakeInspector(),
		Pressure:  pressure.Fixed{Level: pressure.Normal, Reason: pressure.ReasonNone},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.SetHost(capacityOf(Budget{MaxQuantity, MaxQuantity, MaxQuantity}), time.Hour); err != nil {
		b.Fatal(err)
	}
	if err := a.SetPlan(kernelCaps); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
		a.Close()
	})
	p, err := a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 100})
	if err != nil {
		b.Fatal(err)
	}
	return a, p
}

// idGen makes launch IDs: random ones, as scope.NewID makes them today,
// or time-ordered ones (a millisecond timestamp, then a counter), which
// land at the right edge of the journal's B+tree instead of in a random
// leaf.
type idGen func() string

var (
	randomIDs  idGen = scope.NewID
	seq        atomic.Uint64
	orderedIDs idGen = func() string {
		return fmt.Sprintf("%012x%020x", time.Now().UnixMilli(), seq.Add(1))
	}
)

// admitSerial admits n new keys one after another and returns each
// latency.
func admitSerial(b *testing.B, a *Authority, p Principal, ids idGen, n int) []time.Duration {
	b.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = ids()
	}
	lat := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		if _, err := a.Admit(context.Background(), p, keys[i], meaning, job); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	return lat
}

// boltUpdateP50 measures the floor under every Admit: bbolt's durable
// Update of one 1 KiB value, which fdatasyncs twice (pages, then meta).
func boltUpdateP50(b *testing.B, dir string, n int) time.Duration {
	b.Helper()
	db, err := bolt.Open(filepath.Join(dir, "floor.db"), 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 1024)
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		if err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return bk.Put([]byte(scope.NewID()), val)
		}); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	return p50(lat)
}

// BenchmarkAdmit measures the two targets against this disk's
// fsync latency, measured in the same run:
//
//   - lone_client: a single caller's Admit p50 within 2× one fsync;
//     bbolt's own durable Update, the floor, is reported beside it;
//   - clients_64: 64 concurrent callers at least 10× a lone caller's
//     rate, measured just before them.
//
// Every Admit is a new attempt, durable before it is answered. Each runs
// with random launch IDs and with time-ordered ones.
func BenchmarkAdmit(b *testing.B) {
	for _, g := range []struct {
		name string
		ids  idGen
	}{{"random_ids", randomIDs}, {"ordered_ids", orderedIDs}} {
		b.Run("lone_client/"+g.name, func(b *testing.B) {
			dir := b.TempDir()
			fsync := fsyncP50(b, dir, 500)
			floor := boltUpdateP50(b, dir, 500)
			a, p := benchAuthority(b, dir)
			admitSerial(b, a, p, g.ids, 50) // warm the file
			b.ResetTimer()
			lat := admitSerial(b, a, p, g.ids, b.N)
			b.StopTimer()
			med := p50(lat)
			b.ReportMetric(float64(med.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(fsync.Microseconds())/1000, "fsync-p50-ms")
			b.ReportMetric(float64(floor.Microseconds())/1000, "bbolt-update-p50-ms")
			b.ReportMetric(float64(med)/float64(fsync), "p50/fsync")
		})
		b.Run("clients_64/"+g.name, func(b *testing.B) {
			dir := b.TempDir()
			a, p := benchAuthority(b, dir)
			const lone = 1000
			start := time.Now()
			admitSerial(b, a, p, g.ids, lone)
			loneRate := lone / time.Since(start).Seconds()
			keys := make([]string, b.N)
			for i := range keys {
				keys[i] = g.ids()
			}
			var next atomic.Int64
			b.ResetTimer()
			start = time.Now()
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						if _, err := a.Admit(context.Background(), p, keys[i], meaning, job); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			rate := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(rate, "admits/s")
			b.ReportMetric(loneRate, "lone-admits/s")
			b.ReportMetric(rate/loneRate, "speedup")
		})
	}
}

// BenchmarkFsync is this disk's primitive alone: a 4 KiB write made
// durable with fdatasync.
func BenchmarkFsync(b *testing.B) {
	dir := b.TempDir()
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := 0; b.Loop(); i++ {
		if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}
