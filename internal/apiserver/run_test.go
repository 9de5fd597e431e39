package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// logBuffer collects a server's log; the server writes it from its own
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func runBody(t *testing.T, req localapi.RunRequest) string {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// postRun posts req to socket and decodes a 200 answer.
func postRun(t *testing.T, socket string, req localapi.RunRequest) localapi.RunResult {
	t.Helper()
	status, _, body := call(t, socket, "POST", localapi.RunPath, runBody(t, req))
	if status != 200 {
		t.Fatalf("POST %s = %d %s, want 200", localapi.RunPath, status, body)
	}
	var res localapi.RunResult
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return res
}

// A run reaches the daemon as a launch request with the caller pinned,
// and the daemon's plan is answered as the wire's.
func TestRunAnswersThePlan(t *testing.T) {
	d := apiservertest.NewDaemon()
	type asked struct {
		req launch.Request
		pid int
	}
	got := make(chan asked, 1)
	plan := launch.Plan{
		ID: "0123456789abcdef0123456789abcdef", Scope: "marshal-coder-0123456789abcdef0123456789abcdef.scope",
		Attempt: "a-1", Path: "/usr/bin/git", Argv: []string{"git", "status"}, Env: []string{"HOME=/home/dev", "X=\xff"},
		Dir: "/srv/web", Unaccounted: launch.UnaccountedResourceUnavailable,
	}
	d.OnRun(func(ctx context.Context, req launch.Request, caller *launch.Process) (launch.Plan, error) {
		got <- asked{req, caller.PID}
		return plan, nil
	})
	socket := apiservertest.Serve(t, d, apiserver.Options{})

	res := postRun(t, socket, localapi.RunRequest{
		Workspace: "web", Argv: []string{"git", "status"}, PTY: true, TimeoutMS: 90000,
		Env: [][]byte{[]byte("HOME=/home/dev"), []byte("X=\xff")},
	})
	want := localapi.RunResult{Plan: &localapi.ExecPlan{
		Path: plan.Path, Argv: plan.Argv, Env: [][]byte{[]byte("HOME=/home/dev"), []byte("X=\xff")}, Dir: plan.Dir,
		ID: plan.ID, Scope: plan.Scope, Attempt: "a-1", Unaccounted: "resource_unavailable",
	}}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("run answered %+v, want %+v", res.Plan, want.Plan)
	}
	a := <-got
	wantReq := launch.Request{Workspace: "web", Argv: []string{"git", "status"}, TTY: true, Timeout: 90 * time.Second,
		Env: []string{"HOME=/home/dev", "X=\xff"}}
	if !reflect.DeepEqual(a.req, wantReq) {
		t.Errorf("the daemon was asked %+v, want %+v", a.req, wantReq)
	}
	// This test process is the peer.
	if a.pid != os.Getpid() {
		t.Errorf("the pinned caller is pid %d, want %d", a.pid, os.Getpid())
	}
}

// Every refusal code and attempt state of the launch path has its wire
// name; anything else is INTERNAL and unknown. A refusal is an answer,
// not a failed request.
func TestRunRefusalsMapToTheWire(t *testing.T) {
	tests := []struct {
		code      launch.Code
		state     launch.State
		wantCode  string
		wantState string
	}{
		{launch.CodeWorkspaceNotReady, launch.StateNotAsked, localapi.RefusalWorkspaceNotReady, localapi.AttemptNotAsked},
		{launch.CodeExecNotAllowed, launch.StateNotAsked, localapi.RefusalExecNotAllowed, localapi.AttemptNotAsked},
		{launch.CodeWorkspaceBusy, launch.StateNotAsked, localapi.RefusalWorkspaceBusy, localapi.AttemptNotAsked},
		{launch.CodeResourceUnavailable, launch.StateDenied, localapi.RefusalResourceUnavailable, localapi.AttemptDenied},
		{launch.CodePolicyUnsupported, launch.StateNotRecorded, localapi.RefusalPolicyUnsupported, localapi.AttemptNotRecorded},
		{launch.CodeAuthorityUnavailable, launch.StateNotRecorded, localapi.RefusalAuthorityUnavailable, localapi.AttemptNotRecorded},
		{launch.CodeAdmissionUnknown, launch.StateUnknown, localapi.RefusalAdmissionUnknown, localapi.AttemptUnknown},
		{launch.CodeInternal, launch.StateCancelled, localapi.RefusalInternal, localapi.AttemptCancelled},
		{launch.CodeResourceUnavailable, launch.StateExpired, localapi.RefusalResourceUnavailable, localapi.AttemptExpired},
		{"SOMETHING_NEW", "something_new", localapi.RefusalInternal, localapi.AttemptUnknown},
	}
	var mu sync.Mutex
	var ref *launch.Refusal
	d := apiservertest.NewDaemon()
	d.OnRun(func(context.Context, launch.Request, *launch.Process) (launch.Plan, error) {
		mu.Lock()
		defer mu.Unlock()
		// Wrapped, as the launch path's callers may see it.
		return launch.Plan{}, fmt.Errorf("launching: %w", ref)
	})
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	for _, tc := range tests {
		t.Run(strings.ToLower(string(tc.code))+"_"+string(tc.state), func(t *testing.T) {
			mu.Lock()
			ref = &launch.Refusal{Code: tc.code, Detail: "live process limit reached (8 of 8)", Attempt: "a-7", PID: 4242, State: tc.state}
			mu.Unlock()
			res := postRun(t, socket, localapi.RunRequest{Workspace: "web", Argv: []string{"true"}})
			want := &localapi.Refusal{Code: tc.wantCode, Detail: "live process limit reached (8 of 8)", Attempt: "a-7", Process: 4242, State: tc.wantState}
			if res.Plan != nil || res.Explain != nil || res.Refusal == nil || *res.Refusal != *want {
				t.Errorf("refusal %s/%s answered %+v, want %+v", tc.code, tc.state, res.Refusal, want)
			}
		})
	}
}

// A run that fails otherwise than by a refusal is 500 INTERNAL with a
// fixed message; its cause goes to the log only.
func TestRunFailureKeepsItsCauseInTheLog(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.OnRun(func(context.Context, launch.Request, *launch.Process) (launch.Plan, error) {
		return launch.Plan{}, errors.New("journal on fire")
	})
	var log logBuffer
	socket := apiservertest.Serve(t, d, apiserver.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	status, _, body := call(t, socket, "POST", localapi.RunPath, runBody(t, localapi.RunRequest{Argv: []string{"true"}}))
	const want = `{"code":"INTERNAL","message":"the run failed; see marshald's log"}`
	if status != 500 || strings.TrimSpace(body) != want {
		t.Errorf("failed run = %d %s, want 500 %s", status, body, want)
	}
	if !strings.Contains(log.String(), "journal on fire") {
		t.Errorf("the log does not hold the cause:\n%s", log.String())
	}
}

func TestExplain(t *testing.T) {
	explanation := launch.Explanation{
		Meaning: admission.ExecutionMeaning{ExecutableIdentity: "/usr/bin/git", CWDIdentity: "/srv/web", Argv: []string{"git"},
			EnvironmentChanges: map[string]string{}, TimeoutMS: 1000},
		Digest:        "sha256:abc",
		Participation: v1alpha1.ParticipationRequired,
		Intent: admission.Intent{Profile: "coder", Requested: admission.Budget{CPUMilli: 500, MemoryBytes: 1 << 30, Tasks: 64},
			Minimum: admission.Levels{CPU: v1alpha1.LevelCooperative, Memory: v1alpha1.LevelKernel, PIDs: v1alpha1.LevelAccounted}},
		Plan: &admission.Plan{
			CPU:    cgroup.Enforcement{Level: v1alpha1.LevelCooperative, Method: cgroup.MethodQoS},
			Memory: cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV1, Controller: "memory"},
			PIDs:   cgroup.Enforcement{Level: v1alpha1.LevelKernel, Method: cgroup.MethodCgroupV1, Controller: "pids"},
		},
		Supported: true, Ready: true,
		Free:   admission.Budget{CPUMilli: 100, MemoryBytes: 2 << 30, Tasks: 1000},
		Target: admission.Budget{CPUMilli: 2000, MemoryBytes: 4 << 30, Tasks: 4096},
		Fits:   false, Shortage: "cpu_milli",
		Limits: cgroup.Limits{CPUMilli: 500, MemoryBytes: 1 << 30, Tasks: 64},
	}
	meaning, _ := json.Marshal(explanation.Meaning)
	wantExplain := &localapi.Explain{Meaning: meaning, Digest: "sha256:abc", Admission: localapi.ExplainAdmission{
		Participation: "required",
		Request:       v1alpha1.Amounts{CPUMilli: 500, MemoryBytes: 1 << 30, Tasks: 64},
		Minimum:       map[string]string{"cpu": "cooperative", "memory": "kernel", "pids": "accounted"},
		Host: []v1alpha1.Enforcement{
			{Resource: "cpu", Level: v1alpha1.LevelCooperative, Method: "qos_and_priority"},
			{Resource: "memory", Level: v1alpha1.LevelKernel, Method: "cgroup_v1", Controller: "memory"},
			{Resource: "pids", Level: v1alpha1.LevelKernel, Method: "cgroup_v1", Controller: "pids"},
		},
		Supported: true, Ready: true,
		Free:     v1alpha1.Amounts{CPUMilli: 100, MemoryBytes: 2 << 30, Tasks: 1000},
		Target:   v1alpha1.Amounts{CPUMilli: 2000, MemoryBytes: 4 << 30, Tasks: 4096},
		Shortage: "cpu_milli",
		Limits:   v1alpha1.Amounts{CPUMilli: 500, MemoryBytes: 1 << 30, Tasks: 64},
	}}
	tests := []struct {
		name   string
		answer error
		status int
		want   string
	}{
		{name: "explained", status: 200},
		{name: "not_running", answer: fmt.Errorf("explaining: %w", launch.ErrNotRunning), status: 503,
			want: `{"code":"UNAVAILABLE","message":"marshald is starting"}`},
		{name: "refused", answer: &launch.Refusal{Code: launch.CodeExecNotAllowed, Detail: "argv0 not allowed", State: launch.StateNotAsked}, status: 200,
			want: `{"refusal":{"code":"EXEC_NOT_ALLOWED","detail":"argv0 not allowed","process":0,"state":"not_asked"}}`},
		{name: "failed", answer: errors.New("no"), status: 500, want: `{"code":"INTERNAL","message":"the run failed; see marshald's log"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := apiservertest.NewDaemon()
			asked := make(chan launch.Request, 1)
			d.OnExplain(func(_ context.Context, req launch.Request) (launch.Explanation, error) {
				asked <- req
				if tc.answer != nil {
					return launch.Explanation{}, tc.answer
				}
				return explanation, nil
			})
			d.OnRun(func(context.Context, launch.Request, *launch.Process) (launch.Plan, error) {
				t.Error("an explained run was run")
				return launch.Plan{}, errors.New("not asked for")
			})
			socket := apiservertest.Serve(t, d, apiserver.Options{})
			req := localapi.RunRequest{Workspace: "web", Argv: []string{"git"}, TimeoutMS: 1000, Explain: true}
			status, _, body := call(t, socket, "POST", localapi.RunPath, runBody(t, req))
			if tc.want != "" {
				if status != tc.status || strings.TrimSpace(body) != tc.want {
					t.Errorf("explain = %d %s, want %d %s", status, body, tc.status, tc.want)
				}
			} else {
				var res localapi.RunResult
				if err := json.Unmarshal([]byte(body), &res); status != 200 || err != nil || !reflect.DeepEqual(res.Explain, wantExplain) || res.Plan != nil || res.Refusal != nil {
					t.Errorf("explain = %d %s (%v), want %+v", status, body, err, wantExplain)
				}
			}
			if got := <-asked; got.Workspace != "web" || !slices.Equal(got.Argv, []string{"git"}) || got.Timeout != time.Second {
				t.Errorf("explain asked %+v", got)
			}
		})
	}
}

// A backup is answered with its length, as the daemon's copy has it; a
// failed one with a fixed message.
func TestBackup(t *testing.T) {
	d := apiservertest.NewDaemon()
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	c := client.New(socket)

	_, err := c.BackupTo(t.Context(), filepath.Join(t.TempDir(), "failed.db"))
	var apiErr *localapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeInternal || apiErr.Message != "the backup failed; marshald's log has the cause" {
		t.Errorf("a failed backup = %v, want INTERNAL with the fixed message", err)
	}

	data := bytes.Repeat([]byte("journal page "), 10000)
	d.SetBackup(data)
	path := filepath.Join(t.TempDir(), "admission.db")
	n, err := c.BackupTo(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || n != int64(len(data)) || !bytes.Equal(got, data) {
		t.Errorf("backup wrote %d bytes (%v), equal %v; want %d", n, err, bytes.Equal(got, data), len(data))
	}
	status, header, _ := call(t, socket, "GET", localapi.BackupPath, "")
	if status != 200 || header.Get("Content-Length") != fmt.Sprint(len(data)) || header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("GET %s = %d, headers %v", localapi.BackupPath, status, header)
	}
}
