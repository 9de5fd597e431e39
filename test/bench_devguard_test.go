//go:build linux

package test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/devguardwire/devguardtest"
)

// roomyDevGuard gives the host room for every admission a benchmark
// makes, and each admission asks for little.
func roomyDevGuard(m string) string {
	return strings.Replace(m, "capacity: {cpu_milli: 2000, memory_bytes: 2147483648, tasks: 1024}",
		"capacity: {cpu_milli: 1000000000, memory_bytes: 1000000000000, tasks: 1000000000}", 1)
}

// benchSession is one CodeSpace session of an admission: connect, hello,
// authenticate, status, register, admit, close. A session closed at
// hello, because marshald had not yet seen the end of the one it
// replaces and served 32 still, is opened again. An error is a session
// that failed, most often a frame past its 250 ms deadline on a machine
// too busy to serve it in time.
func benchSession(sock, instance, attempt string) error {
	var c *devguardtest.Client
	for {
		var err error
		c, err = devguardtest.Connect(sock, devguardtest.CodeSpace)
		if err == nil {
			break
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			return err
		}
	}
	defer c.Close()
	if _, err := c.Authenticate(devguardtest.Consumer("codespace", "g1", codespaceSecret)); err != nil {
		return err
	}
	if _, err := c.Status(); err != nil {
		return err
	}
	if _, err := c.Register(instance); err != nil {
		return err
	}
	a := dgAdmission(attempt)
	a.Intent.Requested = devguardtest.Budget{CPUMilli: 1, MemoryBytes: 1 << 20, Tasks: 1}
	r, err := c.Admit(a)
	if err == nil && r.Phase != "prepared" {
		err = fmt.Errorf("admitted %s", r.Phase)
	}
	return err
}

// BenchmarkDevGuardSession times a full CodeSpace session of an
// admission against marshald, end to end: hello, authenticate, status,
// register (a reactivation, as every session but the first is) and
// admit, on a fresh connection. It reports the median and the 99th
// percentile in milliseconds. Each admission commits to the journal.
func BenchmarkDevGuardSession(b *testing.B) {
	if raceEnabled {
		b.Skip("times a daemon: run without -race")
	}
	g := startDevGuardWith(b, roomyDevGuard, devguardsDeadline...)
	if err := benchSession(g.sock, "codespace-bench", "warm"); err != nil {
		b.Fatal(err)
	}
	times := make([]time.Duration, 0, b.N)
	failed := 0
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := benchSession(g.sock, "codespace-bench", fmt.Sprintf("s-%d", i)); err != nil {
			failed++
			continue
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	if len(times) == 0 {
		b.Fatal("no session completed")
	}
	b.ReportMetric(ms(median(times)), "session-median-ms")
	b.ReportMetric(ms(percentile(times, 99)), "session-p99-ms")
	b.ReportMetric(float64(failed), "failed-sessions")
}

// BenchmarkDevGuardAdmits32Sessions is admissions per second with 32
// sessions at once, DevGuard's limit, each a full CodeSpace session of
// one admission, opened again as soon as the last one closed. Commits of
// sessions that wait together share the journal's sync.
func BenchmarkDevGuardAdmits32Sessions(b *testing.B) {
	if raceEnabled {
		b.Skip("times a daemon: run without -race")
	}
	g := startDevGuardWith(b, roomyDevGuard, devguardsDeadline...)
	const sessions = 32
	if err := benchSession(g.sock, "codespace-bench", "warm"); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	next := make(chan int)
	b.ResetTimer()
	start := time.Now()
	for range sessions {
		wg.Go(func() {
			for i := range next {
				if err := benchSession(g.sock, "codespace-bench", fmt.Sprintf("p-%d", i)); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(int64(b.N)-failed.Load())/elapsed.Seconds(), "admits/s")
	b.ReportMetric(float64(failed.Load()), "failed-sessions")
}
