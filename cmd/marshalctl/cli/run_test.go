package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
)

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return result{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
}

// Usage errors are found before marshald is asked anything.
func TestRunUsageErrors(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no_workspace", []string{"run", "--", "true"}, "run needs a workspace"},
		{"no_command", []string{"run", "-w", "web"}, "needs at least 1 argument"},
		{"both_terminal_choices", []string{"run", "--pty", "--no-pty", "-w", "web", "--", "true"}, "exclude each other"},
		{"negative_timeout", []string{"run", "--timeout", "-1s", "-w", "web", "--", "true"}, "--timeout"},
		{"unknown_output", []string{"run", "-o", "yaml", "-w", "web", "--", "true"}, "unknown output format"},
		{"argv_not_utf8", []string{"run", "-w", "web", "--", "true", "\xff"}, "is not UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"--socket", socket}, tc.args...)...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, %q; want %d and %q", r.code, r.stderr, ExitUsage, tc.want)
			}
		})
	}
}

func TestRunUnreachableDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	r := runCLI(t, "--socket", socket, "run", "-w", "web", "--", "true")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "marshald is not running at "+socket) {
		t.Errorf("exit %d, %q; want %d and what to do", r.code, r.stderr, ExitFailure)
	}
}

// Every refusal code has its own documented exit status.
func TestRunExitCodes(t *testing.T) {
	want := map[string]int{
		localapi.RefusalWorkspaceNotReady: 77, localapi.RefusalExecNotAllowed: 77, localapi.RefusalForbidden: 77, localapi.RefusalWorkspaceBusy: 75,
		localapi.RefusalResourceUnavailable: 69, localapi.RefusalPolicyUnsupported: 78,
		localapi.RefusalAuthorityUnavailable: 76, localapi.RefusalAdmissionUnknown: 71, localapi.RefusalInternal: 70,
		"SOMETHING_NEW": 70,
	}
	help := runCLI(t, "run", "--help").stdout
	for code, status := range want {
		if got := runner.RefusalExitCode(code); got != status {
			t.Errorf("RefusalExitCode(%q) = %d, want %d", code, got, status)
		}
	}
	for _, code := range runner.RefusalCodes() {
		if !strings.Contains(help, code) {
			t.Errorf("run --help does not document %s", code)
		}
	}
}

// A refusal is printed as two lines on standard error, or as one JSON
// object with -o json, and ends run with its code's status; the request
// carries argv, workspace, timeout and environment.
func TestRunRefusalOutput(t *testing.T) {
	refusal := localapi.Refusal{Code: localapi.RefusalWorkspaceBusy, Detail: "live process limit reached (8 of 8)", Process: 4242, State: localapi.AttemptNotAsked}
	asked := make(chan launch.Request, 2)
	d := apiservertest.NewDaemon()
	d.OnRun(func(_ context.Context, req launch.Request, _ *launch.Process) (launch.Plan, error) {
		asked <- req
		return launch.Plan{}, &launch.Refusal{Code: launch.CodeWorkspaceBusy, Detail: refusal.Detail, PID: refusal.Process, State: launch.StateNotAsked}
	})
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	t.Setenv("MARSHAL_TEST_ENV", "kept")

	r := runCLI(t, "--socket", socket, "run", "--timeout", "1m30s", "-w", "web", "--", "git", "status", "--short")
	wantErr := "WORKSPACE_BUSY: live process limit reached (8 of 8)\nattempt -, process 4242, state not_asked; nothing was started\n"
	if r.code != 75 || r.stderr != wantErr || r.stdout != "" {
		t.Errorf("refusal = exit %d, stdout %q, stderr %q; want 75 and\n%s", r.code, r.stdout, r.stderr, wantErr)
	}
	got := <-asked
	if got.Workspace != "web" || !slices.Equal(got.Argv, []string{"git", "status", "--short"}) || got.Timeout != 90*time.Second ||
		!slices.Contains(got.Env, "MARSHAL_TEST_ENV=kept") {
		t.Errorf("request = %+v", got)
	}

	r = runCLI(t, "--socket", socket, "run", "-o", "json", "-w", "web", "--", "true")
	var obj localapi.Refusal
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || obj != refusal || r.code != 75 || r.stderr != "" {
		t.Errorf("-o json = exit %d, stdout %q (%v), stderr %q", r.code, r.stdout, err, r.stderr)
	}
}
