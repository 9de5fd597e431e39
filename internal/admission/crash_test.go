package admission

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/scope"
)

// The crash child is this test binary run again with these variables set.
const (
	envChild  = "ADMISSION_TEST_CHILD"
	envPath   = "ADMISSION_TEST_JOURNAL"
	envPrefix = "ADMISSION_TEST_PREFIX"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(runChild(mode, os.Getenv(envPath), os.Getenv(envPrefix)))
	}
	os.Exit(m.Run())
}

// runChild is the process the crash test kills: "hold" opens the journal
// and waits; "admit" admits, commits and cancels as fast as it can with
// two workers, and launches as the launch path does (AdmitLaunch, then
// BindAndAuthorize) with two more, printing each answer only once it has
// it.
func runChild(mode, path, prefix string) int {
	a, err := Open(path, Options{
		Inspector: newFakeInspector(),
		Pressure:  pressure.Fixed{Level: pressure.Normal, Reason: pressure.ReasonNone},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		// One write per line: a pipe never interleaves it.
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	if mode == "hold" {
		say("holding")
		select {}
	}
	huge := Budget{MaxQuantity, MaxQuantity, MaxQuantity}
	if err := a.SetHost(capacityOf(huge), time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := a.SetPlan(kernelCaps); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	go a.Run(ctx) // the child ends by SIGKILL, never by stopping
	p, err := a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 100})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	say("ready")
	iter, _ := strconv.Atoi(prefix)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("%08x%08x%016x", iter, w, i)
				if w >= 2 {
					// The launch path's two commits: admitted and begun,
					// then bound and authorized.
					l, err := a.AdmitLaunch(ctx, p, id, meaning, job)
					if err != nil {
						say("E %s %v", id, err)
						return
					}
					say("L %s %s", id, l.Record.Phase)
					r, err := a.BindAndAuthorize(ctx, p, id, l.Permit, childEvidence(id))
					if err != nil {
						say("E %s %v", id, err)
						return
					}
					say("R %s %s", id, r.Record.Phase)
					continue
				}
				r, err := a.Admit(ctx, p, id, meaning, job)
				if err != nil {
					say("E %s %v", id, err)
					return
				}
				say("A %s %s", id, r.Phase)
				l, err := a.BeginLaunch(ctx, p, id)
				if err != nil {
					say("E %s %v", id, err)
					return
				}
				say("B %s %s", id, l.Record.Phase)
				if i%3 == 0 {
					c, err := a.Cancel(ctx, p, id)
					if err != nil {
						say("E %s %v", id, err)
						return
					}
					say("C %s %s", id, c.Phase)
				}
			}
		})
	}
	wg.Wait()
	return 1
}

// childEvidence is fresh evidence of id's scope, its root the owner.
func childEvidence(id string) ScopeEvidence {
	return ScopeEvidence{Name: scope.ScopeName(job.Profile, id), ObservedAt: time.Now(), Exists: true, Populated: true}
}

type child struct {
	cmd  *exec.Cmd
	out  *bufio.Reader
	once sync.Once
}

func startCrashChild(t *testing.T, path, mode string) *child {
	t.Helper()
	return startChild(t, path, mode, "0")
}

func startChild(t testing.TB, path, mode, prefix string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, envPath+"="+path, envPrefix+"="+prefix)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, out: bufio.NewReader(stdout)}
	t.Cleanup(c.kill)
	return c
}

// kill SIGKILLs the child and reaps it.
func (c *child) kill() {
	c.once.Do(func() {
		c.cmd.Process.Signal(syscall.SIGKILL)
		io.Copy(io.Discard, c.out)
		c.cmd.Wait()
	})
}

func (c *child) waitLine(t *testing.T, want string) {
	t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		t.Fatalf("child said %q, %v; want %q", line, err, want)
	}
}

// The crash test: a child doing admissions on the real journal is
// SIGKILLed at random points; after each reopen nothing answered is lost
// and nothing is charged twice. 100 kills, 20 with -short.
func TestCrashAtRandomPointsLosesNothingAnsweredAndChargesNothingTwice(t *testing.T) {
	kills := 100
	if testing.Short() {
		kills = 20
	}
	dir := t.TempDir()
	var path string
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	answeredTotal := 0
	for iter := range kills {
		// Ten kills share a journal, so recovery meets the leftovers of
		// earlier crashes while the journal stays small enough to check
		// quickly.
		if iter%10 == 0 {
			path = filepath.Join(dir, fmt.Sprintf("admission-%d.db", iter/10))
			if err := Create(path); err != nil {
				t.Fatal(err)
			}
		}
		c := startChild(t, path, "admit", strconv.Itoa(iter))
		// answered: the last answer the child printed per key.
		answered := map[string]string{}
		lines := rng.IntN(300)
		if rng.IntN(5) == 0 {
			// Sometimes kill during open or recovery, before any answer.
			lines = -1
		}
		if lines < 0 {
			c.cmd.Process.Signal(syscall.SIGKILL)
		}
		for n := 0; lines >= 0 && n <= lines; n++ {
			line, err := c.out.ReadString('\n')
			if err != nil {
				t.Fatalf("kill %d: child ended early: %v", iter, err)
			}
			f := strings.Fields(line)
			switch {
			case f[0] == "ready":
			case f[0] == "E":
				t.Fatalf("kill %d: child error: %s", iter, line)
			default:
				answered[f[1]] = f[0] + " " + f[2]
			}
		}
		c.kill()
		answeredTotal += len(answered)
		checkAfterCrash(t, path, iter, answered)
	}
	t.Logf("%d kills, %d attempts answered before them", kills, answeredTotal)
}

// checkAfterCrash reopens the journal as the daemon would after a crash
// and checks every answer the child gave.
func checkAfterCrash(t *testing.T, path string, iter int, answered map[string]string) {
	t.Helper()
	clk := pressure.Fixed{Level: pressure.Normal, Reason: pressure.ReasonNone}
	a, err := Open(path, Options{Inspector: newFakeInspector(), Pressure: clk})
	if err != nil {
		t.Fatalf("kill %d: reopen: %v", iter, err)
	}
	defer a.Close()
	charged, err := a.Charged(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var sum Budget
	for _, r := range charged {
		sum = sum.Add(r.Reservation.Quantities)
	}
	s := a.Snapshot()
	if s.Committed != sum || s.Charged != len(charged) {
		t.Fatalf("kill %d: totals %+v over %d, records add up to %+v over %d", iter, s.Committed, s.Charged, sum, len(charged))
	}
	if err := a.db.View(func(tx *bolt.Tx) error {
		stored, _, err := storedRecords(tx)
		if err != nil {
			return err
		}
		for id, last := range answered {
			r, found := stored[id]
			if !found {
				return fmt.Errorf("answered attempt %s (%s) is lost", id, last)
			}
			// Restart makes committed work suspect; the next step the child
			// had in flight may have committed unanswered.
			ok := false
			switch last {
			case "A prepared":
				ok = r.Phase == PhasePrepared || r.Phase == PhaseSuspect
			case "A denied":
				ok = r.Phase == PhaseDenied
			case "B launch_committed", "C draining", "L launch_committed", "R run_authorized":
				ok = r.Phase == PhaseSuspect
			}
			if !ok {
				return fmt.Errorf("attempt %s answered %q is %s in the journal", id, last, r.Phase)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("kill %d: %v", iter, err)
	}
	// Replaying answered admissions returns the stored records and
	// charges nothing again.
	if err := a.SetHost(capacityOf(Budget{MaxQuantity, MaxQuantity, MaxQuantity}), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPlan(kernelCaps); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kill %d: Run: %v", iter, err)
		}
	}()
	p, err := a.Register(ctx, "runner", 1, Peer{UID: 1000, PID: 100})
	if err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for id := range answered {
		if replayed == 8 {
			break
		}
		replayed++
		r, err := a.Admit(ctx, p, id, meaning, job)
		if err != nil || r.ID != id || r.Reservation == nil {
			t.Fatalf("kill %d: replay of %s = %+v, %v", iter, id, r, err)
		}
	}
	if after := a.Snapshot(); after.Committed != s.Committed || after.Charged != s.Charged {
		t.Fatalf("kill %d: replays moved the totals from %+v to %+v", iter, s.Committed, after.Committed)
	}
}
