package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// These tests run marshalctl as a process of its own, the test binary
// started again with mainEnv set, so that real signals reach it.
const mainEnv = "MARSHALCTL_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// marshalctl returns the command that runs marshalctl with args; prefix,
// when set, is a command line that execs it.
func marshalctl(t *testing.T, prefix []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	argv := append(append(prefix, os.Args[0]), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "GORACE=atexit_sleep_ms=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// serveRun answers run requests with fn on a fresh socket until t ends,
// and returns the socket.
func serveRun(t *testing.T, fn apiservertest.RunFunc) string {
	t.Helper()
	d := apiservertest.NewDaemon()
	d.OnRun(fn)
	return apiservertest.Serve(t, d, apiserver.Options{})
}

// An interrupt while marshald works on the run ends marshalctl with 130
// and says that nothing was started; marshald sees the caller go away.
func TestRunInterruptedBeforeTheAgentStarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal syscall.Signal
	}{
		{"sigint", syscall.SIGINT},
		{"sigterm", syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan struct{})
			wentAway := make(chan struct{})
			socket := serveRun(t, func(ctx context.Context, _ launch.Request, _ *launch.Process) (launch.Plan, error) {
				close(asked)
				select {
				case <-ctx.Done():
					close(wentAway)
				case <-time.After(testutil.Deadline):
				}
				return launch.Plan{}, ctx.Err()
			})
			cmd, stdout, stderr := marshalctl(t, nil, "--socket", socket, "run", "-w", "web", "--", "/bin/true")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-asked:
			case <-time.After(testutil.Deadline):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("marshald was not asked after %v: %s", testutil.Deadline, stderr)
			}
			if err := cmd.Process.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			const want = "marshalctl: interrupted; nothing was started\n"
			if code := cmd.ProcessState.ExitCode(); code != 130 || stderr.String() != want || stdout.Len() != 0 {
				t.Errorf("interrupted run: %v, exit %d, stdout %q, stderr %q; want 130 and %q", err, code, stdout, stderr, want)
			}
			select {
			case <-wentAway:
			case <-time.After(testutil.Deadline):
				t.Errorf("marshald did not see the caller go away after %v", testutil.Deadline)
			}
		})
	}
}

// The agent starts with SIGINT and SIGTERM as marshalctl started: caught
// by marshalctl to cancel the request, they are not caught, and SIGINT
// is still ignored when it was.
func TestRunAgentKeepsSignalDispositions(t *testing.T) {
	root := t.TempDir()
	socket := serveRun(t, func(_ context.Context, req launch.Request, _ *launch.Process) (launch.Plan, error) {
		return launch.Plan{
			Path: "/bin/cat", Argv: []string{"cat", "/proc/self/status"}, Env: req.Env, Dir: root,
			ID: "3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c", Scope: "marshal-coder-3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c.scope",
		}, nil
	})
	for _, tc := range []struct {
		name          string
		prefix        []string
		wantIgnoreInt bool
	}{
		{"default", nil, false},
		{"sigint_ignored", []string{"/bin/sh", "-c", `trap "" INT; exec "$@"`, "sh"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, stdout, stderr := marshalctl(t, tc.prefix, "--socket", socket, "run", "--no-pty", "-w", "web", "--", "cat")
			if err := cmd.Run(); err != nil {
				t.Fatalf("run: %v\n%s", err, stderr)
			}
			ignored, err := sigIgn(stdout.String())
			if err != nil {
				t.Fatalf("the agent's status: %v\n%s", err, stdout)
			}
			if got := ignored&sigBit(syscall.SIGINT) != 0; got != tc.wantIgnoreInt {
				t.Errorf("the agent ignores SIGINT: %v, want %v (SigIgn %x)", got, tc.wantIgnoreInt, ignored)
			}
			if ignored&sigBit(syscall.SIGTERM) != 0 {
				t.Errorf("the agent ignores SIGTERM (SigIgn %x)", ignored)
			}
		})
	}
}

// sigIgn reads the ignored-signal mask of a /proc/PID/status.
func sigIgn(status string) (uint64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no SigIgn line")
}

func sigBit(s syscall.Signal) uint64 { return 1 << (uint(s) - 1) }
