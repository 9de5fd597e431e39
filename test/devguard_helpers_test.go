//go:build linux

package test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/devguardwire/devguardtest"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// childRoleEnv names the role in which TestMain runs this binary again,
// as a child of a test: a process other than the test's own, such as a
// second owner or a launch helper of the test's grant.
const childRoleEnv = "MARSHAL_TEST_CHILD_ROLE"

// The consumers' secrets; only their digests are in the manifests.
var (
	codespaceSecret = strings.Repeat("c0", 32)
	otherSecret     = strings.Repeat("0e", 32)
	adminSecret     = strings.Repeat("ad", 32)
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// devguardManifests declares profile interactive, consumer codespace (a
// control service of three instances, reserving 100m, 64 MiB and 8 tasks
// each), consumer Other_CI.v1 (a workload of one instance, its id no
// DNS-1123 name) and a Host of 2 CPUs, 2 GiB and 1024 tasks with the
// administrator's digest. Its prepared attempts wait ten minutes for
// their launch, not DevGuard's 5 s: no test here is of their expiry, and
// a busy machine must not expire one a test holds prepared.
func devguardManifests() string {
	return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: interactive}
spec: {}
---
apiVersion: marshal.dev/v1alpha1
kind: Consumer
metadata: {name: codespace}
spec:
  generation: g1
  role: control_service
  credential_sha256: %s
  max_instances: 3
  control_reservation: {cpu_milli: 100, memory_bytes: 67108864, tasks: 8}
---
apiVersion: marshal.dev/v1alpha1
kind: Consumer
metadata: {name: other}
spec:
  consumer_id: Other_CI.v1
  generation: g7
  role: workload
  credential_sha256: %s
  max_instances: 1
---
apiVersion: marshal.dev/v1alpha1
kind: Host
metadata: {name: local}
spec:
  capacity: {cpu_milli: 2000, memory_bytes: 2147483648, tasks: 1024}
  prepared_ttl: 10m
  devguard: {admin_credential_sha256: %s, policy_revision: rev-7}
`, sha256Hex(codespaceSecret), sha256Hex(otherSecret), sha256Hex(adminSecret))
}

// dgDaemon is marshald serving DevGuard's wire on sock.
type dgDaemon struct {
	*daemon
	sock string
	// args are marshald's arguments besides the harness's, every start.
	args []string
}

// startDevGuard starts marshald with the DevGuard socket on the
// manifests, and waits until both consumers can authenticate and the
// authority can decide.
func startDevGuard(t testing.TB) *dgDaemon {
	t.Helper()
	return startDevGuardWith(t, func(m string) string { return m })
}

// devguardsDeadline, passed to startDevGuardWith, keeps DevGuard's 250 ms
// on marshald's frames: for the test of it, and for benchmarks, which
// count the sessions a busy machine makes miss it.
var devguardsDeadline = []string{"--devguard-frame-deadline", devguardtest.FrameDeadline.String()}

// startDevGuardWith starts marshald on devguardManifests as edit changes
// them, with args, and waits as startDevGuard does. Its sessions wait for
// each frame as long as a test waits for any event, not DevGuard's 250 ms
// (hello states 250 ms all the same): on a busy machine a test's session
// must not end while the test is descheduled between two requests.
// devguardsDeadline in args keeps the 250 ms.
func startDevGuardWith(t testing.TB, edit func(string) string, args ...string) *dgDaemon {
	t.Helper()
	testutil.RequireRoot(t)
	d := newDaemon(t)
	d.write("all.yaml", edit(devguardManifests()))
	args = append([]string{"--devguard-frame-deadline", testutil.Deadline.String()}, args...)
	g := &dgDaemon{daemon: d, sock: filepath.Join(filepath.Dir(d.socket), "devguard", "authority.sock"), args: args}
	g.start()
	return g
}

// start starts (or restarts) marshald and waits for it.
func (g *dgDaemon) start() {
	g.daemon.start(append([]string{"--devguard-socket", g.sock}, g.args...)...)
	w := g.watch("consumers")
	for _, name := range []string{"codespace", "other"} {
		w.until(g.t, name, "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
	}
	g.waitReady()
}

// kill kills marshald as a crash would, and waits for its end.
func (g *dgDaemon) kill() {
	g.t.Helper()
	g.cmd.Process.Kill()
	select {
	case <-g.exited:
	case <-time.After(testutil.Deadline):
		g.t.Fatal("marshald did not end on SIGKILL")
	}
}

// session is what CodeSpace opens for each request: hello, authenticate,
// status and register, then the request.
func (g *dgDaemon) session(t testing.TB, instance string) (*devguardtest.Client, devguardtest.Instance) {
	t.Helper()
	c, err := devguardtest.Connect(g.sock, devguardtest.CodeSpace)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if role, err := c.Authenticate(devguardtest.Consumer("codespace", "g1", codespaceSecret)); err != nil || role != "control_service" {
		t.Fatalf("authenticate = %q, %v; want control_service", role, err)
	}
	if st, err := c.Status(); err != nil || !st.RegistrationReady {
		t.Fatalf("status = %+v, %v; want registration ready", st, err)
	}
	in, err := c.Register(instance)
	if err != nil {
		t.Fatalf("register %s: %v", instance, err)
	}
	return c, in
}

// grant admits attempt id for instance codespace-a and begins its launch,
// each in a session of its own, as CodeSpace does: the admission, the
// instance and the permit the owner hands its helper.
func (g *dgDaemon) grant(t testing.TB, id string) (devguardtest.Admission, devguardtest.Instance, string) {
	t.Helper()
	a := dgAdmission(id)
	c, in := g.session(t, "codespace-a")
	if _, err := c.Admit(a); err != nil {
		t.Fatalf("admit %s: %v", id, err)
	}
	s, _ := g.session(t, "codespace-a")
	gr, err := s.BeginLaunch(a.Key)
	if err != nil || gr.Permit == nil || gr.Attempt.Phase != "launch_committed" {
		t.Fatalf("begin_launch %s = %+v, %v; want launch_committed with a permit", id, gr, err)
	}
	return a, in, *gr.Permit
}

// codeOf returns the wire code of err, "" when it is not an error answer.
func codeOf(err error) string {
	var e *devguardtest.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func wantCode(t testing.TB, what string, err error, code string) {
	t.Helper()
	if got := codeOf(err); got != code {
		t.Fatalf("%s = %v, want error %s", what, err, code)
	}
}

// dgAdmission is an admission of attempt id by codespace, of interactive.
func dgAdmission(id string) devguardtest.Admission {
	return devguardtest.Admission{
		Key:             devguardtest.Key{ConsumerID: "codespace", ConsumerGeneration: "g1", AttemptID: id},
		ExecutionDigest: sha256Hex("execution " + id),
		Intent: devguardtest.Intent{
			Profile:   "interactive",
			Requested: devguardtest.Budget{CPUMilli: 100, MemoryBytes: 64 << 20, Tasks: 8},
			Minimum:   devguardtest.Levels{CPU: "accounted", Memory: "accounted", PIDs: "accounted"},
		},
	}
}

// committed is what charged attempts hold, as describe host shows it.
func (d *daemon) committed() map[string]any {
	d.t.Helper()
	var h map[string]any
	if err := json.Unmarshal([]byte(d.mustCtl("get", "host", "local", "-o", "json")), &h); err != nil {
		d.t.Fatal(err)
	}
	c, _ := field(h, "status", "admission", "committed").(map[string]any)
	return c
}

// selfStartTicks is field 22 of this process's stat line.
func selfStartTicks(t testing.TB) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	n, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func bootID(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// permitCarrier is a descriptor holding the permit and its end, as
// DevGuard's client hands a permit to its helper.
func permitCarrier(t testing.TB, permit string) *os.File {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fds[1], []byte(permit)); err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[1])
	return os.NewFile(uintptr(fds[0]), "permit")
}

// helperRun is one marshal-devguard-launch started by the test, its
// owner.
type helperRun struct {
	cmd    *exec.Cmd
	report *os.File
	done   chan struct{}
	err    error
	stdout *os.File
}

// startHelper starts marshal-devguard-launch for attempt of instance
// with permit, running program; the program's stdin is stdin.
func (g *dgDaemon) startHelper(t testing.TB, attempt, instance, permit string, stdin *os.File, program ...string) *helperRun {
	t.Helper()
	args := []string{"--endpoint", g.sock, "--consumer", "codespace", "--generation", "g1", "--attempt", attempt,
		"--instance", instance, "--permit-fd", "3", "--report-fd", "4", "--"}
	return g.startHelperArgs(t, permit, stdin, append(args, program...)...)
}

func (g *dgDaemon) startHelperArgs(t testing.TB, permit string, stdin *os.File, args ...string) *helperRun {
	t.Helper()
	carrier := permitCarrier(t, permit)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	h := &helperRun{cmd: exec.Command(filepath.Join(bin, "marshal-devguard-launch"), args...), report: rd, done: make(chan struct{}), stdout: out}
	h.cmd.ExtraFiles = []*os.File{carrier, wr}
	h.cmd.Stdin, h.cmd.Stdout, h.cmd.Stderr = stdin, out, out
	h.cmd.Env = agentEnv()
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	carrier.Close()
	wr.Close()
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		<-h.done
		rd.Close()
		out.Close()
	})
	return h
}

// transcript reads the helper's report to its end: its JSON lines.
func (h *helperRun) transcript(t testing.TB) []map[string]any {
	t.Helper()
	h.report.SetReadDeadline(time.Now().Add(testutil.Deadline))
	var lines []map[string]any
	sc := bufio.NewScanner(h.report)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("report line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// wait waits for the helper, or its program, to end and returns the
// status.
func (h *helperRun) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(testutil.Deadline):
		t.Fatal("the launch helper did not end")
	}
	var ee *exec.ExitError
	if errors.As(h.err, &ee) {
		return ee.ExitCode()
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	return 0
}

// child runs this test binary as a child of the test in role, with args,
// and returns what it printed.
func child(t testing.TB, role string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childRoleEnv+"="+role)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s %v: %v\n%s", role, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// runChild is a child's role; it prints its findings, and its status says
// whether it could act at all.
func runChild(role string, args []string) int {
	result := func(err error) string {
		var e *devguardtest.Error
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &e):
			return e.Code
		}
		return "error: " + err.Error()
	}
	switch role {
	case "register":
		// SOCKET CONSUMER GENERATION SECRET INSTANCE
		c, err := devguardtest.Connect(args[0], devguardtest.Compatibility{MinimumProtocol: 1, MaximumProtocol: 1, Required: []string{"static_control_reservations"}})
		if err != nil {
			fmt.Println(result(err))
			return 0
		}
		defer c.Close()
		if _, err := c.Authenticate(devguardtest.Consumer(args[1], args[2], args[3])); err != nil {
			fmt.Println(result(err))
			return 0
		}
		_, err = c.Register(args[4])
		fmt.Println(result(err))
		return 0
	case "present":
		// SOCKET ATTEMPT INSTANCE PERMIT TIMES: a helper presenting one
		// grant TIMES times, each in a session of its own.
		times, _ := strconv.Atoi(args[4])
		var out []string
		for range times {
			c, err := devguardtest.Connect(args[0], devguardtest.HelperCompat)
			if err != nil {
				out = append(out, result(err))
				continue
			}
			k := devguardtest.Key{ConsumerID: "codespace", ConsumerGeneration: "g1", AttemptID: args[1]}
			a, err := c.Launch(k, args[2], args[3])
			c.Close()
			if err != nil {
				out = append(out, result(err))
				continue
			}
			out = append(out, fmt.Sprintf("may_exec=%v phase=%s", a.MayExec, a.Attempt.Phase))
		}
		cg, _ := os.ReadFile("/proc/self/cgroup")
		fmt.Println(strings.Join(out, "\n"))
		fmt.Print(string(cg))
		return 0
	}
	if role == "allocate" {
		return allocate()
	}
	fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
	return 2
}
