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

// syncProbe times this disk's durable 4 KiB writes, the unit an Admit is
// measured against: appended to a file (a new block, which the file
// system must allocate and log: what a journal's new record costs), or
// rewritten in place (a block written before).
type syncProbe struct {
	b       *testing.B
	f       *os.File
	buf     []byte
	appends int64
}

// rewritten is how many blocks the probe rewrites in turn; appends go
// after them.
const rewritten = 256

func newSyncProbe(b *testing.B, dir string) *syncProbe {
	b.Helper()
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	p := &syncProbe{b: b, f: f, buf: make([]byte, 4096)}
	if _, err := f.Write(make([]byte, rewritten*4096)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return p
}

func (p *syncProbe) write(off int64) time.Duration {
	start := time.Now()
	if _, err := p.f.WriteAt(p.buf, off); err != nil {
		p.b.Fatal(err)
	}
	if err := unix.Fdatasync(int(p.f.Fd())); err != nil {
		p.b.Fatal(err)
	}
	return time.Since(start)
}

// append times a 4 KiB append made durable with fdatasync. The file is cut
// back now and then, untimed, so that it stays small.
func (p *syncProbe) append() time.Duration {
	if p.appends == 4096 {
		if err := p.f.Truncate(rewritten * 4096); err != nil {
			p.b.Fatal(err)
		}
		p.appends = 0
	}
	p.appends++
	return p.write((rewritten + p.appends - 1) * 4096)
}

// rewrite times the i-th in-place rewrite of a 4 KiB block made durable
// with fdatasync.
func (p *syncProbe) rewrite(i int) time.Duration {
	return p.write(int64(i%rewritten) * 4096)
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

// newKeys makes n launch IDs as launches get them: random.
func newKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = scope.NewID()
	}
	return keys
}

// admitSerial admits n new keys one after another and returns each
// latency.
func admitSerial(b *testing.B, a *Authority, p Principal, n int) []time.Duration {
	b.Helper()
	keys := newKeys(n)
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

// boltFloor times the floor under every Admit: bbolt's durable Update
// of one 1 KiB value under the next sequence key, as the journal lays
// attempts out; it fdatasyncs twice (pages, then meta).
type boltFloor struct {
	b   *testing.B
	db  *bolt.DB
	val []byte
	seq uint64
}

func newBoltFloor(b *testing.B, dir string) *boltFloor {
	b.Helper()
	db, err := bolt.Open(filepath.Join(dir, "floor.db"), 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("b"))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return &boltFloor{b: b, db: db, val: make([]byte, 1024)}
}

func (f *boltFloor) update() time.Duration {
	f.seq++
	start := time.Now()
	if err := f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("b")).Put(attemptKey(f.seq), f.val)
	}); err != nil {
		f.b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkAdmit measures the two targets against this disk's
// fsync latency, measured in the same run:
//
//   - lone_client: a single caller's Admit p50 within 2× one fsync, a
//     durable 4 KiB append; an in-place rewrite and bbolt's own durable
//     Update, the floor, are reported beside it;
//   - clients_64: 64 concurrent callers at least 10× a lone caller's
//     rate, measured just before them.
//
// Every Admit is a new attempt with a random launch ID, durable before it
// is answered.
func BenchmarkAdmit(b *testing.B) {
	b.Run("lone_client", func(b *testing.B) {
		dir := b.TempDir()
		probe := newSyncProbe(b, dir)
		floor := newBoltFloor(b, dir)
		a, p := benchAuthority(b, dir)
		admitSerial(b, a, p, 50) // warm the file
		keys := newKeys(b.N)
		// Each Admit is timed between the primitives it is compared
		// with, so that all of them see the same disk and load.
		var appends, rewrites, updates, admits []time.Duration
		b.ResetTimer()
		for i := range b.N {
			appends = append(appends, probe.append())
			rewrites = append(rewrites, probe.rewrite(i))
			updates = append(updates, floor.update())
			start := time.Now()
			if _, err := a.Admit(context.Background(), p, keys[i], meaning, job); err != nil {
				b.Fatal(err)
			}
			admits = append(admits, time.Since(start))
		}
		b.StopTimer()
		med, fsync := p50(admits), p50(appends)
		b.ReportMetric(ms(med), "p50-ms")
		b.ReportMetric(ms(fsync), "fsync-p50-ms")
		b.ReportMetric(ms(p50(rewrites)), "fsync-rewrite-p50-ms")
		b.ReportMetric(ms(p50(updates)), "bbolt-update-p50-ms")
		b.ReportMetric(float64(med)/float64(fsync), "p50/fsync")
		b.ReportMetric(float64(med)/float64(p50(updates)), "p50/bbolt-update")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("clients_64", func(b *testing.B) {
		dir := b.TempDir()
		a, p := benchAuthority(b, dir)
		const lone = 1000
		start := time.Now()
		admitSerial(b, a, p, lone)
		loneRate := lone / time.Since(start).Seconds()
		keys := newKeys(b.N)
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

// BenchmarkFsync is this disk's primitive alone: a 4 KiB write made
// durable with fdatasync, appended or rewritten in place.
func BenchmarkFsync(b *testing.B) {
	b.Run("append", func(b *testing.B) {
		p := newSyncProbe(b, b.TempDir())
		for b.Loop() {
			p.append()
		}
	})
	b.Run("rewrite", func(b *testing.B) {
		p := newSyncProbe(b, b.TempDir())
		for i := 0; b.Loop(); i++ {
			p.rewrite(i)
		}
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
