//go:build linux

package test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// An admitted launch runs the agent in its scope, in the workspace root,
// with the workspace's environment; identify from inside names the
// profile; the exit status is the agent's; afterwards the reservation
// and the slot are back.
func TestRunAdmittedAgentRunsInItsScope(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required", maxLive: 1}), "web")
	r := d.runNow("-w", "web", "--", "sh", "-c",
		`marshalctl identify > identity; pwd > cwd; echo "$MARSHAL_WORKSPACE $MARSHAL_PROFILE $MARSHAL_NETWORK $TEAM" > env; cat /proc/self/cgroup > cgroup; exit 42`)
	if r.code != 42 {
		t.Fatalf("exit %d, want the agent's 42\nstderr: %s", r.code, r.stderr)
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("the agent did not write %s: %v", name, err)
		}
		return strings.TrimSpace(string(data))
	}
	m := regexp.MustCompile(`^profile coder, scope (marshal-coder-([0-9a-f]{32})\.scope), id ([0-9a-f]{32})$`).FindStringSubmatch(read("identity"))
	if m == nil || m[2] != m[3] {
		t.Fatalf("identify inside the agent = %q, want profile coder and its scope", read("identity"))
	}
	if got := read("cwd"); got != root {
		t.Errorf("cwd = %s, want the workspace root %s", got, root)
	}
	if got := read("env"); got != "web coder open web" {
		t.Errorf("environment = %q, want the workspace's", got)
	}
	if !strings.Contains(read("cgroup"), "/"+m[1]) {
		t.Errorf("a child of the agent is outside its scope:\n%s", read("cgroup"))
	}
	d.waitSettled(t)
	// The slot is free again: max_live 1 runs once more.
	if r := d.runNow("-w", "web", "--", "true"); r.code != 0 {
		t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
	}
}

// The agent is in its scope before its first instruction: the command
// itself, and a child it forks at once, read their scope.
func TestRunNothingStartsOutsideTheScope(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "none"}), "web")
	r := d.runNow("-w", "web", "--", "cat", "/proc/self/cgroup")
	if r.code != 0 || !regexp.MustCompile(`(?m)^0::/.*/marshal-coder-[0-9a-f]{32}\.scope$`).MatchString(r.stdout) {
		t.Fatalf("the agent's own cgroup at its start = exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// sh forks cat as its very first action.
	r = d.runNow("-w", "web", "--", "sh", "-c", "cat /proc/self/cgroup; cat /proc/self/cgroup")
	lines := regexp.MustCompile(`(?m)^0::(.*)$`).FindAllStringSubmatch(r.stdout, -1)
	if r.code != 0 || len(lines) != 2 || lines[0][1] != lines[1][1] || !strings.HasSuffix(lines[0][1], ".scope") {
		t.Fatalf("children forked at once = exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, ok := scope.Parse(lines[0][1]); !ok {
		t.Errorf("%s is not a marshal scope", lines[0][1])
	}
}

// Signals sent to marshalctl run reach the agent, which is the same
// process; its exit status, or the signal that ended it, is run's.
func TestRunSignalsAndExitStatusPassThrough(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required"}), "web")
	tests := []struct {
		name   string
		script string
		signal syscall.Signal
		// wantCode is the exit code, or -1 with wantSignal.
		wantCode   int
		wantSignal syscall.Signal
		marker     string
	}{
		{"sigterm_trapped", `trap 'echo term > m-$$; exit 143' TERM; echo $$ > pid; touch ready-$$; read x`, syscall.SIGTERM, 143, 0, "term"},
		{"sigint_default", `echo $$ > pid; touch ready-$$; read x`, syscall.SIGINT, -1, syscall.SIGINT, ""},
		{"sigterm_default", `echo $$ > pid; touch ready-$$; read x`, syscall.SIGTERM, -1, syscall.SIGTERM, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := d.startRun("-w", "web", "--", "sh", "-c", "cd "+dir+" && "+tc.script)
			waitFiles(t, dir, "ready-", 1)
			pid, _ := os.ReadFile(filepath.Join(dir, "pid"))
			if got, _ := strconv.Atoi(strings.TrimSpace(string(pid))); got != a.cmd.Process.Pid {
				t.Fatalf("the agent is pid %s, marshalctl run was %d: not the same process", pid, a.cmd.Process.Pid)
			}
			a.cmd.Process.Signal(tc.signal)
			code := a.wait(t)
			var ee *exec.ExitError
			errors.As(a.err, &ee)
			if tc.wantCode >= 0 && code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			if tc.wantSignal != 0 {
				ws, ok := ee.Sys().(syscall.WaitStatus)
				if !ok || !ws.Signaled() || ws.Signal() != tc.wantSignal {
					t.Errorf("ended with %v, want the signal %v", a.err, tc.wantSignal)
				}
			}
			if tc.marker != "" {
				if n := countFiles(t, dir, "m-"); n != 1 {
					t.Errorf("the agent's trap did not run")
				}
			}
		})
	}
	d.waitSettled(t)
}

// --pty runs the agent on the caller's real pseudo-terminal: it reads the
// terminal, and ^C reaches it by job control. --no-pty runs it without.
func TestRunOnAPseudoTerminal(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "none"}), "web")

	t.Run("pty", func(t *testing.T) {
		dir := t.TempDir()
		cmd := d.runCmd("--pty", "-w", "web", "--", "sh", "-c",
			"cd "+dir+" && test -t 0 && test -t 1 && touch tty-ok; read line; echo \"$line\" > got; trap 'touch interrupted; exit 130' INT; touch ready; read again")
		master, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer master.Close()
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := master.Read(buf); err != nil {
					return
				}
			}
		}()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() { cmd.Process.Kill(); <-done }()
		waitFiles(t, dir, "tty-ok", 1)
		master.Write([]byte("hello from the terminal\n"))
		waitFiles(t, dir, "ready", 1)
		if got, _ := os.ReadFile(filepath.Join(dir, "got")); strings.TrimSpace(string(got)) != "hello from the terminal" {
			t.Errorf("the agent read %q from its terminal", got)
		}
		master.Write([]byte{3}) // ^C
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("after ^C: %v, want exit 130 from the agent's trap", err)
			}
			done <- nil
		case <-time.After(testutil.Deadline):
			t.Fatal("^C did not reach the agent")
		}
		if countFiles(t, dir, "interrupted") != 1 {
			t.Error("the agent's INT trap did not run")
		}
	})

	t.Run("no_pty", func(t *testing.T) {
		dir := t.TempDir()
		// A shell leads the terminal's session, as a login shell does;
		// marshalctl runs as its child.
		inner := strings.Join([]string{filepath.Join(bin, "marshalctl"), "--socket", d.socket, "run", "--no-pty", "-w", "web", "--",
			"sh", "-c", `'cd ` + dir + ` && { test -t 0 || touch stdin-not-tty; } && { (: < /dev/tty) 2>/dev/null || touch no-ctty; }'`}, " ")
		cmd := exec.Command("sh", "-c", inner+"; exit $?")
		cmd.Env = agentEnv()
		master, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer master.Close()
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := master.Read(buf); err != nil {
					return
				}
			}
		}()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run --no-pty: %v", err)
			}
		case <-time.After(testutil.Deadline):
			cmd.Process.Kill()
			t.Fatal("run --no-pty did not end")
		}
		if countFiles(t, dir, "stdin-not-tty") != 1 || countFiles(t, dir, "no-ctty") != 1 {
			entries, _ := os.ReadDir(dir)
			t.Errorf("--no-pty left the agent a terminal: %v", entries)
		}
	})

	t.Run("pty_without_a_terminal", func(t *testing.T) {
		r := d.runNow("--pty", "-w", "web", "--", "true")
		if r.code != 2 || !strings.Contains(r.stderr, "--pty: standard input is not a terminal") {
			t.Errorf("--pty without a terminal = exit %d, %q; want a usage error", r.code, r.stderr)
		}
	})
	d.waitSettled(t)
}

// A refusal says what, for which attempt, process and state, that nothing
// was started, exits with its code's status, and reserves nothing.
func TestRunRefusals(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "{cpu_milli: 1000, memory_bytes: 1073741824, tasks: 512}",
		launchWorkspace{name: "web", participation: "required"},
		launchWorkspace{name: "big", participation: "required", request: "      memory_bytes: 2147483648\n"},
		launchWorkspace{name: "listed", participation: "required", argv0: []string{"git"}},
	), "web", "big", "listed")
	tests := []struct {
		name  string
		args  []string
		code  int
		lines *regexp.Regexp
	}{
		{"workspace_missing", []string{"-w", "nope", "--", "touch", "marker"}, 77,
			regexp.MustCompile(`^WORKSPACE_NOT_READY: workspace not declared: "nope"\nattempt -, process \d+, state not_asked; nothing was started\n$`)},
		{"argv0_not_allowed", []string{"-w", "listed", "--", "touch", "marker"}, 77,
			regexp.MustCompile(`^EXEC_NOT_ALLOWED: argv0 not allowed: "touch"\nattempt -, process \d+, state not_asked; nothing was started\n$`)},
		{"executable_not_found", []string{"-w", "web", "--", "no-such-command", "marker"}, 77,
			regexp.MustCompile(`^EXEC_NOT_ALLOWED: executable not found: "no-such-command"\nattempt -, process \d+, state not_asked; nothing was started\n$`)},
		{"shortage", []string{"-w", "big", "--", "touch", "marker"}, 69,
			regexp.MustCompile(`^RESOURCE_UNAVAILABLE: memory_bytes requested 2147483648 \(2GiB\), free 1073741824 \(1GiB\) of 1073741824 \(1GiB\)\nattempt [0-9a-f]{32}, process \d+, state denied; nothing was started\n$`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := d.runNow(tc.args...)
			if r.code != tc.code || !tc.lines.MatchString(r.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d matching %s", r.code, r.stderr, tc.code, tc.lines)
			}
			if _, err := os.Stat(filepath.Join(root, "marker")); err == nil {
				t.Fatal("a refused run started something")
			}
			if a := d.admission(); a.Charged != 0 {
				t.Errorf("a refused run is charged: %+v", a)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		r := d.runNow("-o", "json", "-w", "big", "--", "touch", "marker")
		var got struct {
			Code, Detail, Attempt, State string
			Process                      int
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 69 {
			t.Fatalf("-o json = exit %d, %q: %v", r.code, r.stdout, err)
		}
		if got.Code != "RESOURCE_UNAVAILABLE" || got.State != "denied" || !scope.ValidID(got.Attempt) || got.Process <= 0 {
			t.Errorf("refusal = %+v", got)
		}
	})
	d.waitSettled(t)
}

// An optional workspace runs unaccounted, and says so, when the request
// does not fit.
func TestRunOptionalRunsUnaccounted(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "{cpu_milli: 1000, memory_bytes: 1073741824, tasks: 512}",
		launchWorkspace{name: "big", participation: "optional", request: "      memory_bytes: 2147483648\n"}), "big")
	r := d.runNow("-w", "big", "--", "touch", "marker")
	if r.code != 0 || !strings.Contains(r.stderr, "running unaccounted (resource_unavailable)") {
		t.Fatalf("exit %d, stderr %q; want a run that says it is unaccounted", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "marker")); err != nil {
		t.Fatal("the unaccounted run did not run")
	}
	d.waitSettled(t)
}

// --explain says what the execution means and needs, and runs nothing.
func TestRunExplain(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required"}), "web")
	r := d.runNow("--explain", "-w", "web", "--", "touch", "marker")
	var got struct {
		Meaning struct {
			Executable string   `json:"executable_identity"`
			CWD        string   `json:"cwd_identity"`
			Argv       []string `json:"argv"`
			TimeoutMS  *uint64  `json:"timeout_ms"`
		} `json:"meaning"`
		Digest    string `json:"digest"`
		Admission struct {
			Participation string `json:"participation"`
			Supported     bool   `json:"supported"`
			Fits          bool   `json:"fits"`
		} `json:"admission"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("--explain = exit %d, %q: %v", r.code, r.stdout+r.stderr, err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(got.Digest) || got.Meaning.CWD != root ||
		!strings.HasSuffix(got.Meaning.Executable, "/touch") || got.Meaning.TimeoutMS != nil ||
		got.Admission.Participation != "required" || !got.Admission.Supported || !got.Admission.Fits {
		t.Errorf("explain = %+v", got)
	}
	if _, err := os.Stat(filepath.Join(root, "marker")); err == nil {
		t.Fatal("--explain ran the command")
	}
	// A timeout is shown in milliseconds; none (above) is left out.
	r = d.runNow("--explain", "--timeout", "30s", "-w", "web", "--", "touch", "marker")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("--explain --timeout 30s = exit %d, %q: %v", r.code, r.stdout+r.stderr, err)
	}
	if got.Meaning.TimeoutMS == nil || *got.Meaning.TimeoutMS != 30000 {
		t.Errorf("--explain --timeout 30s: timeout_ms = %v, want 30000", got.Meaning.TimeoutMS)
	}
	if a := d.admission(); a.Charged != 0 || len(d.scopeDirs()) != 0 {
		t.Errorf("--explain admitted or created something: %+v, %v", a, d.scopeDirs())
	}
}

// --timeout kills the agent's tree when it expires, and run says so and
// exits with 137; an agent that ends in time ends run as it would
// without a timeout.
func TestRunTimeout(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, "", launchWorkspace{name: "web", participation: "required"}), "web")
	a := d.startRun("--timeout", "300ms", "-w", "web", "--", "sh", "-c", "sleep 600 & wait")
	code := a.wait(t)
	_, stderr := a.output()
	want := regexp.MustCompile(`^marshalctl: --timeout 300ms expired: marshald killed the agent and every process it started \(scope marshal-coder-[0-9a-f]{32}\.scope, attempt [0-9a-f]{32}\)\n$`)
	if code != 137 || !want.MatchString(stderr) {
		t.Errorf("run --timeout: exit %d, stderr %q; want 137 and a line matching %s", code, stderr, want)
	}
	d.waitSettled(t)

	if r := d.runNow("--timeout", "10m", "-w", "web", "--", "sh", "-c", "exit 7"); r.code != 7 || r.stderr != "" {
		t.Errorf("an agent that ends in time: exit %d, stderr %q; want its own 7 and nothing said", r.code, r.stderr)
	}
	a = d.startRun("--timeout", "10m", "-w", "web", "--", "sh", "-c", "kill -TERM $$")
	a.wait(t)
	var ee *exec.ExitError
	if !errors.As(a.err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("an agent ended by SIGTERM ended run with %v, want SIGTERM", a.err)
	}
	if r := d.runNow("--timeout", "10m", "-w", "nope", "--", "true"); r.code != 77 {
		t.Errorf("a refusal with --timeout: exit %d, %q; want 77", r.code, r.stderr)
	}
	d.waitSettled(t)
}
