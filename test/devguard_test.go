//go:build linux

package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/devguardwire/devguardtest"
)

// Hello, authentication and status, every check and refusal of them, as
// CodeSpace's client and DevGuard's server make them.
func TestDevGuardHelloAndAuthentication(t *testing.T) {
	g := startDevGuard(t)
	c, err := devguardtest.Connect(g.sock, devguardtest.CodeSpace)
	if err != nil {
		t.Fatalf("connecting as CodeSpace does: %v", err)
	}
	defer c.Close()
	h := c.Hello
	if h.Authority.PID != uint32(g.cmd.Process.Pid) || h.Protocol != 1 {
		t.Errorf("hello = %+v, want marshald's pid %d and protocol 1", h, g.cmd.Process.Pid)
	}
	for _, want := range []string{"durable_admission", "fenced_launch", "per_resource_evidence", "static_control_reservations"} {
		if !slices.Contains(h.Capabilities, want) {
			t.Errorf("hello states %v, want %s", h.Capabilities, want)
		}
	}
	for _, never := range []string{"macos_cooperative", "parent_lease", "upgrade_drain"} {
		if slices.Contains(h.Capabilities, never) {
			t.Errorf("hello states %s, which marshald does not implement", never)
		}
	}
	wantCode(t, "hello twice", c.Call("hello", map[string]any{"compatibility": devguardtest.CodeSpace}, "hello", nil), "invalid_transition")
	wantCode(t, "status before authenticate", c.Call("status", nil, "status", nil), "unauthorized")
	wantCode(t, "register before authenticate", c.Call("register", map[string]any{"instance_id": "x"}, "registered", nil), "unauthorized")

	for _, tc := range []struct {
		name string
		cred map[string]any
	}{
		{"wrong_secret", devguardtest.Consumer("codespace", "g1", otherSecret)},
		{"other_generation", devguardtest.Consumer("codespace", "g2", codespaceSecret)},
		{"unknown_consumer", devguardtest.Consumer("ci", "g1", codespaceSecret)},
		{"administrator_with_a_consumer_secret", devguardtest.Administrator(codespaceSecret)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := devguardtest.Connect(g.sock, devguardtest.CodeSpace)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Authenticate(tc.cred)
			wantCode(t, "authenticate", err, "unauthorized")
		})
	}
	s, err := devguardtest.Connect(g.sock, devguardtest.Compatibility{MinimumProtocol: 1, MaximumProtocol: 1, Required: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if role, err := s.Authenticate(devguardtest.Administrator(adminSecret)); err != nil || role != "administrator" {
		t.Fatalf("administrator = %q, %v", role, err)
	}
	wantCode(t, "authenticate twice", func() error { _, err := s.Authenticate(devguardtest.Administrator(adminSecret)); return err }(), "invalid_transition")
	if st, err := s.Status(); err != nil || !st.StorageValidated || !st.RegistrationReady || !st.ExecutionReady || len(st.ConfigurationFingerprint) != 64 {
		t.Errorf("the administrator's status = %+v, %v; want every part ready and a fingerprint", st, err)
	}
	_, err = s.Register("admin")
	wantCode(t, "the administrator registering", err, "unauthorized")
	s.Close()

	w, err := devguardtest.Connect(g.sock, devguardtest.Compatibility{MinimumProtocol: 1, MaximumProtocol: 1, Required: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if role, err := w.Authenticate(devguardtest.Consumer("Other_CI.v1", "g7", otherSecret)); err != nil || role != "workload" {
		t.Errorf("a consumer whose id is no DNS name = %q, %v; want workload", role, err)
	}
	w.Close()

	for _, tc := range []struct {
		name   string
		compat devguardtest.Compatibility
	}{
		{"parent_lease_required", devguardtest.Compatibility{MinimumProtocol: 1, MaximumProtocol: 1, Required: []string{"parent_lease"}}},
		{"macos_required", devguardtest.Compatibility{MinimumProtocol: 1, MaximumProtocol: 1, Required: []string{"macos_cooperative"}}},
		{"protocol_two", devguardtest.Compatibility{MinimumProtocol: 2, MaximumProtocol: 2, Required: []string{}}},
		{"minimum_above_maximum", devguardtest.Compatibility{MinimumProtocol: 1, MaximumProtocol: 0, Required: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := devguardtest.Connect(g.sock, tc.compat)
			wantCode(t, "hello", err, "resource_policy_unsupported")
		})
	}
	// Another version, or request id 0: resource_policy_unsupported with
	// the same id, and the session ends.
	for _, tc := range []struct{ name, frame string }{
		{"version_two", `{"version":2,"request_id":7,"body":{"method":"status"}}`},
		{"request_id_zero", `{"version":1,"request_id":0,"body":{"method":"status"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := devguardtest.Dial(g.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Send([]byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			id := uint64(7)
			if tc.name == "request_id_zero" {
				id = 0
			}
			wantCode(t, "the answer", r.ReadAnswer(id, "status", nil), "resource_policy_unsupported")
			if !r.Closed() {
				t.Error("the session goes on")
			}
		})
	}
}

// A frame out of bounds, or a request DevGuard's decoder refuses, ends
// the session without an answer; a frame of the largest size is read.
func TestDevGuardFramesAndStrictDecoding(t *testing.T) {
	g := startDevGuard(t)
	hello := `{"version":1,"request_id":1,"body":{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1,"required":[]}}}}`
	for _, tc := range []struct {
		name string
		send func(c *devguardtest.Client) error
	}{
		{"frame_of_0_bytes", func(c *devguardtest.Client) error { return c.SendFrame(0, nil) }},
		{"frame_of_65537_bytes", func(c *devguardtest.Client) error {
			return c.SendFrame(65537, []byte(hello+strings.Repeat(" ", 65537-len(hello))))
		}},
		{"unknown_field", func(c *devguardtest.Client) error {
			return c.Send([]byte(strings.Replace(hello, `"required":[]`, `"required":[],"pid":1`, 1)))
		}},
		{"unknown_method", func(c *devguardtest.Client) error {
			return c.Send([]byte(strings.Replace(hello, `"method":"hello"`, `"method":"hullo"`, 1)))
		}},
		{"missing_field", func(c *devguardtest.Client) error {
			return c.Send([]byte(strings.Replace(hello, `"maximum_protocol":1,`, ``, 1)))
		}},
		{"secret_not_hex", func(c *devguardtest.Client) error {
			return c.Send([]byte(`{"version":1,"request_id":1,"body":{"method":"authenticate","params":{"credential":{"kind":"administrator","secret":"` + strings.Repeat("Z", 64) + `"}}}}`))
		}},
		{"not_json", func(c *devguardtest.Client) error { return c.Send([]byte("hello")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := devguardtest.Dial(g.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// marshald may close the session before the whole of a
			// frame it refuses by its header is written.
			if err := tc.send(c); err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatal(err)
			}
			if !c.Closed() {
				t.Error("the session was not closed without an answer")
			}
		})
	}
	c, err := devguardtest.Dial(g.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send([]byte(hello + strings.Repeat(" ", 65536-len(hello)))); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadAnswer(1, "hello", nil); err != nil {
		t.Fatalf("a frame of 65536 bytes = %v, want hello's answer", err)
	}
}

// At most 32 sessions are served: the 33rd is closed at once, without an
// answer, while the 32 before it are all served. The 32 stay open
// however long the 33rd takes, startDevGuard's frames waiting as long as
// the test does.
func TestDevGuardThirtyThirdSessionIsClosed(t *testing.T) {
	g := startDevGuard(t)
	var open []*devguardtest.Client
	for range devguardtest.MaxSessions {
		c, err := devguardtest.Dial(g.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	extra, err := devguardtest.Dial(g.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	// Whatever it sends is never answered; marshald may have closed the
	// session before it is written.
	_ = extra.Send([]byte(`{"version":1,"request_id":1,"body":{"method":"status"}}`))
	if !extra.Closed() {
		t.Fatal("a 33rd session was served")
	}
	for i, c := range open {
		if err := c.Greet(devguardtest.CodeSpace); err != nil {
			t.Errorf("session %d of 32: hello = %v", i+1, err)
		}
	}
}

// With DevGuard's own bound, a session that says nothing is closed,
// unanswered, once 250 ms have passed since it was accepted, and not
// before: the deadline covers the idle wait.
func TestDevGuardClosesAnIdleSession(t *testing.T) {
	g := startDevGuardWith(t, func(m string) string { return m }, devguardsDeadline...)
	// Taken before the connection exists, so before marshald accepts it
	// and starts its deadline: however late either side runs, the close
	// comes 250 ms after this at the earliest.
	start := time.Now()
	c, err := devguardtest.Dial(g.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Closed() {
		t.Fatal("an idle session was not closed")
	}
	if d := time.Since(start); d < devguardtest.FrameDeadline {
		t.Errorf("an idle session was closed after %s, before DevGuard's %s", d, devguardtest.FrameDeadline)
	}
}

// Register binds the session's peer; every session registers again,
// which reactivates the instance; another process under its id is a
// conflict; max_instances bounds a consumer's instances.
func TestDevGuardRegistration(t *testing.T) {
	g := startDevGuard(t)
	want := devguardtest.Instance{InstanceID: "codespace-a", Process: devguardtest.Process{
		BootID: bootID(t), PID: uint32(os.Getpid()), StartTicks: selfStartTicks(t),
	}}
	c, in := g.session(t, "codespace-a")
	if in != want {
		t.Fatalf("registered %+v, want this process %+v", in, want)
	}
	_, err := c.Register("codespace-a")
	wantCode(t, "register twice in a session", err, "invalid_transition")
	_, err = c.Register("a b")
	wantCode(t, "an instance id that is not an identifier", err, "invalid_request")
	for range 3 {
		if _, again := g.session(t, "codespace-a"); again != in {
			t.Fatalf("a later session registered %+v, want the same %+v", again, in)
		}
	}
	if got := child(t, "register", g.sock, "codespace", "g1", codespaceSecret, "codespace-a"); got != "attempt_conflict" {
		t.Errorf("another process under the instance's id = %s, want attempt_conflict", got)
	}
	if got := child(t, "register", g.sock, "Other_CI.v1", "g7", otherSecret, "ci-1"); got != "ok" {
		t.Fatalf("the workload's one instance = %s", got)
	}
	// The first child has exited: its place is retired to make room.
	if got := child(t, "register", g.sock, "Other_CI.v1", "g7", otherSecret, "ci-2"); got != "ok" {
		t.Errorf("an instance after the first one's process ended = %s, want ok", got)
	}
	s, err := devguardtest.Connect(g.sock, devguardtest.CodeSpace)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Authenticate(devguardtest.Consumer("Other_CI.v1", "g7", otherSecret)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register("ci-3"); err != nil {
		t.Fatalf("registering while the other instance's process has ended = %v", err)
	}
	if got := child(t, "register", g.sock, "Other_CI.v1", "g7", otherSecret, "ci-4"); got != "resource_unavailable" {
		t.Errorf("a second live instance of a consumer of one = %s, want resource_unavailable", got)
	}
}

// Admission: every field of the record as DevGuard answers it, replay and
// conflict, denials that hold nothing, malformed requests, and another
// consumer's or instance's attempts out of reach.
func TestDevGuardAdmission(t *testing.T) {
	g := startDevGuard(t)
	// codespace's three instances each reserve 100m, 64 MiB and 8 tasks.
	var host map[string]any
	if err := json.Unmarshal([]byte(g.mustCtl("get", "host", "local", "-o", "json")), &host); err != nil {
		t.Fatal(err)
	}
	if r := field(host, "status", "admission", "reserved"); fmt.Sprint(r) != "map[cpu_milli:300 memory_bytes:2.01326592e+08 tasks:24]" {
		t.Errorf("reserved = %v, want three instances' control reservations", r)
	}
	if c := field(host, "status", "admission", "capacity", "cpu_milli"); c != 1700.0 {
		t.Errorf("work capacity cpu = %v, want 2000 less 300 reserved", c)
	}
	c, in := g.session(t, "codespace-a")
	a := dgAdmission("a-1")
	r, err := c.Admit(a)
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	first := append(json.RawMessage(nil), c.Raw...)
	switch {
	case r.Phase != "prepared" || r.Key != a.Key || r.Owner != in:
		t.Fatalf("admitted %+v, want prepared, of its key and this instance", r)
	case r.RequestFingerprint != devguardtest.Fingerprint(a):
		t.Errorf("fingerprint %s, want DevGuard's %s", r.RequestFingerprint, devguardtest.Fingerprint(a))
	case r.PolicyRevision != "rev-7":
		t.Errorf("policy revision %q, want the Host's rev-7", r.PolicyRevision)
	case r.Reservation == nil || r.Reservation.Quantities != a.Intent.Requested || len(r.Reservation.LeaseID) != 36:
		t.Errorf("reservation %+v, want the request under a lease id", r.Reservation)
	case r.Reservation.PreparedAt.BootID != in.Process.BootID || r.Reservation.PrepareDeadlineMS-r.Reservation.PreparedAt.MonotonicMS != 600000:
		t.Errorf("prepared at %+v, deadline %d; want this boot and the Host's 10m prepared_ttl", r.Reservation.PreparedAt, r.Reservation.PrepareDeadlineMS)
	case r.Plan == nil || r.Plan.ScopeKind != "contained_cgroup" || r.Plan.Memory != (devguardtest.Planned{Level: "accounted", Method: "accounting"}):
		t.Errorf("plan %+v, want a contained cgroup that accounts", r.Plan)
	case r.Scope != nil || r.Applied != nil || r.Denial != nil || r.TrackingLost || r.ReleaseReason != nil:
		t.Errorf("a prepared record %+v has more than it should", r)
	}
	if _, err := c.Admit(a); err != nil || string(c.Raw) != string(first) {
		t.Errorf("replay = %v\n%s\nwant the stored record\n%s", err, c.Raw, first)
	}
	other := a
	other.ExecutionDigest = sha256Hex("another meaning")
	_, err = c.Admit(other)
	wantCode(t, "another meaning under the key", err, "attempt_conflict")

	before := g.committed()
	huge := dgAdmission("too-big")
	huge.Intent.Requested.MemoryBytes = 1<<64 - 1
	kernel := dgAdmission("kernel-memory")
	kernel.Intent.Minimum.Memory = "kernel"
	batch := dgAdmission("batch")
	batch.Intent.Profile = "batch"
	for _, tc := range []struct {
		name   string
		a      devguardtest.Admission
		denial string
	}{
		{"shortage", huge, "resource_unavailable"},
		{"unsupported_minimum", kernel, "resource_policy_unsupported"},
		{"profile_not_declared", batch, "resource_policy_unsupported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := g.session(t, "codespace-a")
			r, err := s.Admit(tc.a)
			if err != nil || r.Phase != "denied" || r.Denial == nil || *r.Denial != tc.denial || r.Reservation != nil || r.Plan != nil {
				t.Fatalf("admit = %+v, %v; want denied %s with nothing reserved", r, err, tc.denial)
			}
			if !r.KnownNotStarted() {
				t.Error("a denial is not known not started")
			}
		})
	}
	if after := g.committed(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("committed %v after the denials, was %v", after, before)
	}

	s, _ := g.session(t, "codespace-a")
	for _, tc := range []struct {
		name string
		a    devguardtest.Admission
		code string
	}{
		{"zero_quantity", func() devguardtest.Admission { x := dgAdmission("z"); x.Intent.Requested.Tasks = 0; return x }(), "invalid_request"},
		{"bad_digest", func() devguardtest.Admission { x := dgAdmission("d"); x.ExecutionDigest = "abc"; return x }(), "invalid_request"},
		{"bad_attempt_id", func() devguardtest.Admission { x := dgAdmission("a/b"); return x }(), "invalid_request"},
		{"bad_profile", func() devguardtest.Admission { x := dgAdmission("p"); x.Intent.Profile = "a b"; return x }(), "invalid_request"},
		{"another_consumers_key", func() devguardtest.Admission { x := dgAdmission("k"); x.Key.ConsumerID = "Other_CI.v1"; return x }(), "unauthorized"},
		{"another_generation", func() devguardtest.Admission { x := dgAdmission("k"); x.Key.ConsumerGeneration = "g2"; return x }(), "unauthorized"},
	} {
		_, err := s.Admit(tc.a)
		wantCode(t, tc.name, err, tc.code)
	}
	_, err = s.Lookup(devguardtest.Key{ConsumerID: "codespace", ConsumerGeneration: "g1", AttemptID: "never"})
	wantCode(t, "an unknown key", err, "not_found")

	// Another consumer cannot look the attempt up.
	o, err := devguardtest.Connect(g.sock, devguardtest.CodeSpace)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.Authenticate(devguardtest.Consumer("Other_CI.v1", "g7", otherSecret)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Register("ci-1"); err != nil {
		t.Fatal(err)
	}
	_, err = o.Lookup(a.Key)
	wantCode(t, "another consumer's lookup", err, "unauthorized")

	// Cancel returns the capacity.
	charged := g.committed()
	x, _ := g.session(t, "codespace-a")
	r, err = x.Cancel(a.Key)
	if err != nil || r.Phase != "cancelled" || !r.KnownNotStarted() {
		t.Fatalf("cancel = %+v, %v; want cancelled", r, err)
	}
	after := g.committed()
	if after["cpu_milli"].(float64) != charged["cpu_milli"].(float64)-100 {
		t.Errorf("committed %v after the cancel, was %v: want 100m back", after, charged)
	}
	y, _ := g.session(t, "codespace-a")
	if r, err := y.Cancel(a.Key); err != nil || r.Phase != "cancelled" {
		t.Errorf("cancel again = %+v, %v; want it unchanged", r, err)
	}
	z, _ := g.session(t, "codespace-a")
	if r, err := z.AbandonLaunch(a.Key, "spawn_failed"); err != nil || r.Phase != "cancelled" {
		t.Errorf("abandon of a cancelled attempt = %+v, %v; want it unchanged", r, err)
	}
}

// DevGuard's fenced launch with the real helper: begin_launch grants the
// permit once; the helper presents it, marshald makes the attempt's scope
// with the helper in it, binds and authorizes it, and the program runs in
// the scope; the reservation is released on evidence once it has ended.
func TestDevGuardLaunchRunsTheProgramInItsScope(t *testing.T) {
	g := startDevGuard(t)
	a := dgAdmission("run-1")
	c, in := g.session(t, "codespace-a")
	if _, err := c.Admit(a); err != nil {
		t.Fatal(err)
	}
	s, _ := g.session(t, "codespace-a")
	_, err := s.AbandonLaunch(a.Key, "spawn_failed")
	wantCode(t, "abandoning a prepared attempt", err, "invalid_transition")
	s, _ = g.session(t, "codespace-a")
	grant, err := s.BeginLaunch(a.Key)
	if err != nil || grant.Permit == nil || grant.Attempt.Phase != "launch_committed" || len(*grant.Permit) != 64 {
		t.Fatalf("begin_launch = %+v, %v; want launch_committed with a permit", grant, err)
	}
	permit := *grant.Permit
	s, _ = g.session(t, "codespace-a")
	if again, err := s.BeginLaunch(a.Key); err != nil || again.Permit != nil || again.Attempt.Phase != "launch_committed" {
		t.Errorf("begin_launch again = %+v, %v; want the record and no permit", again, err)
	}

	// A helper of another process than the owner's child, and a wrong
	// permit, are refused and claim nothing.
	self, err := devguardtest.Connect(g.sock, devguardtest.HelperCompat)
	if err != nil {
		t.Fatal(err)
	}
	_, err = self.Launch(a.Key, in.InstanceID, permit)
	wantCode(t, "the owner presenting its own grant", err, "unauthorized")
	self.Close()
	if got := child(t, "present", g.sock, "run-1", in.InstanceID, strings.Repeat("0", 64), "1"); !strings.HasPrefix(got, "unauthorized") {
		t.Errorf("a helper with another permit = %s, want unauthorized", got)
	}

	stdin, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	h := g.startHelper(t, "run-1", in.InstanceID, permit, stdin, "/bin/sh", "-c", "cat /proc/self/cgroup; read line; exit 7")
	stdin.Close()
	lines := h.transcript(t)
	if len(lines) != 1 || lines[0]["phase"] != "ready" {
		t.Fatalf("transcript %v, want ready and then its end", lines)
	}
	s, _ = g.session(t, "codespace-a")
	r, err := s.Lookup(a.Key)
	if err != nil || r.Phase != "run_authorized" || r.Scope == nil || r.Applied == nil {
		t.Fatalf("after the launch = %+v, %v; want run_authorized with its scope and evidence", r, err)
	}
	scope := r.Scope.ScopeID
	switch {
	case !strings.HasPrefix(scope, "marshal-interactive-") || r.Scope.Kind != "contained_cgroup":
		t.Errorf("scope %+v, want a contained cgroup of profile interactive", r.Scope)
	case r.Scope.Root.PID != uint32(h.cmd.Process.Pid) || r.Scope.Root.BootID != in.Process.BootID:
		t.Errorf("scope root %+v, want the helper %d", r.Scope.Root, h.cmd.Process.Pid)
	case r.Applied.CPU != "applied" || r.Applied.Memory != "applied" || r.Applied.PIDs != "applied" || r.Applied.Scope != *r.Scope:
		t.Errorf("applied %+v, want every resource applied on the scope", r.Applied)
	}
	// The transcript ended after READY: the program runs, under the
	// helper's pid, in the scope.
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", h.cmd.Process.Pid)); err != nil || !strings.Contains(string(cg), scope) {
		t.Errorf("the program's cgroup = %q, %v; want its scope %s", cg, err, scope)
	}
	// marshalctl shows the agent as its own, with its attempt.
	agents := g.watch("agents")
	agents.until(t, scope, "shown with its attempt", func(o map[string]any) bool {
		return field(o, "status", "attempt") != nil && field(o, "status", "consumer") == "codespace"
	})

	// The same grant, presented by another helper, is refused: claimed.
	if got := child(t, "present", g.sock, "run-1", in.InstanceID, permit, "1"); !strings.HasPrefix(got, "invalid_transition") {
		t.Errorf("a second helper of the grant = %s, want invalid_transition", got)
	}

	// Terminate signals the program; the reservation is released on the
	// evidence of its end.
	s, _ = g.session(t, "codespace-a")
	term, err := s.Terminate(a.Key, "terminate")
	if err != nil || term.Signalled < 1 || !term.Complete || term.Attempt.Phase != "run_authorized" {
		t.Fatalf("terminate = %+v, %v; want the program signalled, the phase unchanged", term, err)
	}
	if code := h.wait(t); code != -1 && code != 143 {
		t.Errorf("the program ended %d, want by SIGTERM", code)
	}
	hosts := g.watch("hosts")
	hosts.until(t, "local", "nothing charged", func(o map[string]any) bool {
		return field(o, "status", "admission", "charged") == 0.0
	})
	s, _ = g.session(t, "codespace-a")
	r, err = s.Observe(a.Key)
	if err != nil || r.Phase != "released" || r.ReleaseReason == nil || *r.ReleaseReason != "scope_terminated" || r.KnownNotStarted() {
		t.Fatalf("after its end = %+v, %v; want released scope_terminated", r, err)
	}
	s, _ = g.session(t, "codespace-a")
	_, err = s.Terminate(devguardtest.Key{ConsumerID: "codespace", ConsumerGeneration: "g1", AttemptID: "never"}, "kill")
	wantCode(t, "terminating an unknown attempt", err, "not_found")
}

// A helper that presents its grant twice, as after a lost answer, is told
// may_exec once: a replay never execs.
func TestDevGuardMayExecOnlyOnce(t *testing.T) {
	g := startDevGuard(t)
	_, in, permit := g.grant(t, "twice")
	got := child(t, "present", g.sock, "twice", in.InstanceID, permit, "2")
	lines := strings.Split(got, "\n")
	if len(lines) < 2 || lines[0] != "may_exec=true phase=run_authorized" || lines[1] != "may_exec=false phase=run_authorized" {
		t.Fatalf("two presentations = %q, want may_exec true, then false", got)
	}
	if !strings.Contains(got, "marshal-interactive-") {
		t.Errorf("the presenting child is not in the attempt's scope:\n%s", got)
	}
}

// Each way a launch is not started is reported and ends 125, 126 or
// 127; one refused before its claim is abandoned by its owner.
func TestDevGuardHelperRefusalsAndExitCodes(t *testing.T) {
	g := startDevGuard(t)
	grant := func(id string) (devguardtest.Key, string, string) {
		a, in, permit := g.grant(t, id)
		return a.Key, in.InstanceID, permit
	}
	k, inst, permit := grant("missing")
	h := g.startHelper(t, k.AttemptID, inst, permit, nil, "/nonexistent/program")
	lines := h.transcript(t)
	if code := h.wait(t); code != 127 || len(lines) != 2 || lines[0]["phase"] != "ready" || lines[1]["phase"] != "exec_failed" || lines[1]["errno"] != float64(2) {
		t.Errorf("a missing program: exit %d, transcript %v; want 127, ready then exec_failed errno 2", code, lines)
	}

	k, inst, permit = grant("refused")
	h = g.startHelper(t, k.AttemptID, inst, strings.Repeat("f", 64), nil, "/bin/true")
	lines = h.transcript(t)
	if code := h.wait(t); code != 125 || len(lines) != 1 || lines[0]["phase"] != "refused" || lines[0]["code"] != "unauthorized" {
		t.Errorf("a wrong permit: exit %d, transcript %v; want 125, refused unauthorized", code, lines)
	}
	s, _ := g.session(t, "codespace-a")
	r, err := s.AbandonLaunch(k, "helper_exited")
	if err != nil || r.Phase != "released" || r.ReleaseReason == nil || *r.ReleaseReason != "no_helper_created" || !r.KnownNotStarted() {
		t.Errorf("abandoning the unclaimed grant = %+v, %v; want released no_helper_created", r, err)
	}
	// Wrong arguments: nothing to report on, 125.
	h = g.startHelperArgs(t, permit, nil, "--endpoint", "relative.sock", "--permit-fd", "3", "--report-fd", "4", "--", "/bin/true")
	if code := h.wait(t); code != 125 {
		t.Errorf("bad arguments: exit %d, want 125", code)
	}
	// A permit that is not 64 hex digits fails its stage.
	k, inst, _ = grant("short")
	h = g.startHelper(t, k.AttemptID, inst, "abc", nil, "/bin/true")
	lines = h.transcript(t)
	if code := h.wait(t); code != 125 || len(lines) != 1 || lines[0]["phase"] != "failed" || lines[0]["stage"] != "permit" {
		t.Errorf("a short permit: exit %d, transcript %v; want 125, failed at permit", code, lines)
	}
}
