//go:build linux

package test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// launcher is one way of running /bin/true, timed as a whole process.
type launcher struct {
	name string
	cmd  func() *exec.Cmd
}

// BenchmarkRunLatency times `marshalctl run -w W -- /bin/true`, whole
// process, against bare /bin/true and against `systemd-run --user --scope
// true` on a throwaway user manager, for participation none and
// required, with the cgroupfs backend. Each iteration runs every way
// once, interleaved, so that they share the machine's moods; it reports
// the median and the 90th percentile of each, in milliseconds, and what
// marshal adds to the bare exec (the medians' difference), what admission
// adds to a launch (required over none), and what a launch without it
// adds as a share of what systemd-run adds (none-per-systemd-run, and
// the same share for each floor below). A marshalctl built statically
// (CGO_ENABLED=0) is timed too: the build that ships is whatever make
// build makes. marshalctl version --client is timed as the CLI's own
// start and exit, and a Go program that only execs /bin/true (go-exec)
// as the floor of any Go CLI. Two more Go programs make a fresh
// cgroup and start /bin/true in it, as the kernel's share of a launch:
// go-move moves itself in and execs, as marshal's launch does, and
// go-clone starts it there with CLONE_INTO_CGROUP and waits; what none
// adds over go-move is marshal's own software and its round trip. Of
// that, run-path is the part any Go client pays: marshalctl run's launch
// alone (cmd/marshalctl/internal/runpath), without the CLI around it.
//
// Every launch, marshal's and systemd-run's alike, moves a process into
// its scope, and a move takes a host-wide lock whose first writer after a
// quiet moment waits out an RCU grace period (BenchmarkMove in
// internal/cgroup). The ways are timed under two conditions: after=launch,
// each right after the one before, as launches in quick succession run,
// where which of them finds the lock quiet depends on the machine; and
// after=quiet, each after an idle moment longer than a grace period, as a
// person's launch on a quiet machine starts, every move paying the wait
// alike.
func BenchmarkRunLatency(b *testing.B) {
	if raceEnabled {
		b.Skip("times whole processes: run without -race")
	}
	root := b.TempDir()
	d := startLaunchDaemon(b, launchManifests(root, roomy,
		launchWorkspace{name: "none", participation: "none", maxLive: 64},
		launchWorkspace{name: "required", participation: "required", maxLive: 64}), "none", "required")
	static := buildStatic(b, "../cmd/marshalctl")
	goexec := buildStatic(b, "./testdata/goexec")
	golaunch := buildStatic(b, "./testdata/golaunch")
	runpath := buildStatic(b, "../cmd/marshalctl/internal/runpath")
	floors := d.tree.V2("floors")
	if err := os.Mkdir(floors, 0o755); err != nil {
		b.Fatal(err)
	}
	// asAgent is a way that runs name with args in an agent's environment.
	asAgent := func(name string, args ...string) func() *exec.Cmd {
		return func() *exec.Cmd {
			cmd := exec.Command(name, args...)
			cmd.Env = agentEnv()
			return cmd
		}
	}
	run := func(ctl, ws string) func() *exec.Cmd {
		return asAgent(ctl, "--socket", d.socket, "run", "-w", ws, "--", "/bin/true")
	}
	marshalctl := filepath.Join(bin, "marshalctl")
	ways := []launcher{
		{"bare", func() *exec.Cmd { return exec.Command("/bin/true") }},
		// A Go program that only execs: the floor of any Go CLI's share.
		{"go-exec", func() *exec.Cmd { return exec.Command(goexec, "/bin/true") }},
		// The same in a cgroup of its own: the kernel's share of a launch.
		{"go-move", func() *exec.Cmd { return exec.Command(golaunch, "move", floors, "/bin/true") }},
		{"go-clone", func() *exec.Cmd { return exec.Command(golaunch, "clone", floors, "/bin/true") }},
		// marshalctl's own start and exit, asking nothing: the share of
		// the CLI binary in what follows.
		{"marshalctl-version", asAgent(marshalctl, "version", "--client")},
		{"none", run(marshalctl, "none")},
		{"required", run(marshalctl, "required")},
		{"none-static", run(static, "none")},
		{"required-static", run(static, "required")},
		// The launch's request and exec alone, in workspace none; after
		// the ways above, so that none and required follow what they
		// followed before it was here.
		{"run-path", asAgent(runpath, d.socket, "none", "/bin/true")},
	}
	if um := benchUserManager(b); um != nil {
		ways = append(ways, launcher{"systemd-run", func() *exec.Cmd {
			cmd := exec.Command("systemd-run", "--user", "--scope", "--quiet", "true")
			cmd.Env = append(os.Environ(), um.Env()...)
			return cmd
		}})
	}
	b.Run("after=launch", func(b *testing.B) {
		times := timeLaunchers(b, ways, 0)
		reportLaunchers(b, ways, times)
		d.waitSettled(b)
	})
	// After a quiet moment only the ways the targets compare, and the
	// kernel's floors: each iteration idles once per way.
	var compared []launcher
	for _, w := range ways {
		if slices.Contains([]string{"bare", "go-move", "go-clone", "none", "required", "systemd-run"}, w.name) {
			compared = append(compared, w)
		}
	}
	b.Run("after=quiet", func(b *testing.B) {
		times := timeLaunchers(b, compared, testutil.QuietMoment)
		reportLaunchers(b, compared, times)
		d.waitSettled(b)
	})
}

// reportLaunchers reports the median and 90th percentile of each way's
// times, what each adds to the first (bare), and the targets: what
// admission adds to a launch, and what a launch adds to the exec as a
// share of what systemd-run --scope adds.
func reportLaunchers(b *testing.B, ways []launcher, times [][]time.Duration) {
	bare := median(times[0])
	medians := map[string]time.Duration{}
	for i, w := range ways {
		medians[w.name] = median(times[i])
		b.ReportMetric(ms(median(times[i])), w.name+"-median-ms")
		b.ReportMetric(ms(percentile(times[i], 90)), w.name+"-p90-ms")
		if i > 0 {
			b.ReportMetric(ms(median(times[i])-bare), w.name+"-over-bare-ms")
		}
	}
	b.ReportMetric(ms(medians["required"]-medians["none"]), "required-over-none-ms")
	b.ReportMetric(ms(medians["none"]-medians["go-move"]), "none-over-go-move-ms")
	if sr, ok := medians["systemd-run"]; ok && sr > bare {
		// The floors' shares say how much of the target's budget is
		// spent before marshalctl's own CLI adds anything: by the
		// kernel and a Go program's start, then by the launch's round
		// trip (run-path).
		for _, w := range []string{"none", "go-exec", "go-move", "go-clone", "run-path"} {
			if m, ok := medians[w]; ok {
				b.ReportMetric(float64(m-bare)/float64(sr-bare), w+"-per-systemd-run")
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRunThroughput is launches per second of `marshalctl run -w W
// -- /bin/true` with 16 callers launching at once, each as soon as its
// last one ended, for participation none and required.
func BenchmarkRunThroughput(b *testing.B) {
	if raceEnabled {
		b.Skip("times whole processes: run without -race")
	}
	const callers = 16
	root := b.TempDir()
	// A slot and a reservation are held until the agent controller has
	// seen the process's scope end, a moment after the process exited;
	// under this load the controller lags by a few hundred launches:
	// enough slots and capacity that callers never wait for it.
	const huge = "{cpu_milli: 6400000, memory_bytes: 68719476736000, tasks: 6553600}"
	d := startLaunchDaemon(b, launchManifests(root, huge,
		launchWorkspace{name: "none", participation: "none", maxLive: 64 * callers},
		launchWorkspace{name: "required", participation: "required", maxLive: 64 * callers}), "none", "required")
	for _, ws := range []string{"none", "required"} {
		b.Run(ws, func(b *testing.B) {
			var (
				next atomic.Int64
				wg   sync.WaitGroup
				errs = make(chan error, callers)
			)
			start := time.Now()
			for range callers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						cmd := exec.Command(filepath.Join(bin, "marshalctl"), "--socket", d.socket, "run", "-w", ws, "--", "/bin/true")
						cmd.Env = agentEnv()
						if out, err := cmd.CombinedOutput(); err != nil {
							errs <- errors.New(err.Error() + ": " + string(out))
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "launches/s")
			d.waitSettled(b)
		})
	}
}

// buildStatic builds the command in pkg without cgo, statically linked,
// and returns its path.
func buildStatic(b *testing.B, pkg string) string {
	b.Helper()
	dir := b.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building %s statically: %v\n%s", pkg, err, out)
	}
	return filepath.Join(dir, filepath.Base(pkg))
}

// benchUserManager starts a throwaway systemd user manager for b, and
// stops it when b ends; nil when this host cannot run one.
func benchUserManager(b *testing.B) *testutil.UserManager {
	b.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	m, err := testutil.StartUserManager()
	if errors.Is(err, syscall.ECONNREFUSED) {
		m, err = testutil.StartUserManager() // see userManager
	}
	if errors.Is(err, testutil.ErrNoUserManager) {
		b.Logf("no systemd-run comparison: %v", err)
		return nil
	}
	if err != nil {
		b.Fatal(err)
	}
	mounts, _ := cgroup.ReadMounts()
	b.Cleanup(func() {
		if err := m.Stop(); err != nil {
			b.Errorf("stopping the user manager: %v", err)
		}
		for _, mnt := range v1Mounts(mounts) {
			removeEmptyGroups(filepath.Join(mnt, m.Cgroup))
		}
	})
	return m
}

func median(d []time.Duration) time.Duration { return percentile(d, 50) }

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timeLaunchers runs each of ways in turn, b.N rounds, and returns each
// one's wall times, in the order of ways: interleaved, so that the
// machine's load weighs on all alike. Each launch follows an idle time
// of idle, untimed: the condition measured (testutil.QuietMoment), not a
// wait for an event.
func timeLaunchers(b *testing.B, ways []launcher, idle time.Duration) [][]time.Duration {
	b.Helper()
	times := make([][]time.Duration, len(ways))
	b.ResetTimer()
	for range b.N {
		for i, w := range ways {
			if idle > 0 {
				time.Sleep(idle)
			}
			cmd := w.cmd()
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s: %v\n%s", w.name, err, out)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	return times
}
