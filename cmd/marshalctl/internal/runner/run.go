package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Exit statuses of a refused run, one per refusal code, from sysexits.h.
const (
	ExitRunUnavailable   = 69 // RESOURCE_UNAVAILABLE, EGRESS_UNAVAILABLE (EX_UNAVAILABLE)
	ExitRunInternal      = 70 // INTERNAL (EX_SOFTWARE)
	ExitRunUnknown       = 71 // ADMISSION_UNKNOWN (EX_OSERR)
	ExitRunBusy          = 75 // WORKSPACE_BUSY (EX_TEMPFAIL)
	ExitRunAuthority     = 76 // RESOURCE_AUTHORITY_UNAVAILABLE (EX_PROTOCOL)
	ExitRunNotAuthorized = 77 // WORKSPACE_NOT_READY, EXEC_NOT_ALLOWED, FORBIDDEN (EX_NOPERM)
	ExitRunUnsupported   = 78 // RESOURCE_POLICY_UNSUPPORTED, ISOLATION_UNSUPPORTED (EX_CONFIG)
	// ExitRunInterrupted is the status of a run interrupted before the
	// agent was started: 128 + SIGINT, as a shell reports it.
	ExitRunInterrupted = 130
)

// runExitCodes maps each refusal code to its exit status.
var runExitCodes = map[string]int{
	localapi.RefusalWorkspaceNotReady:    ExitRunNotAuthorized,
	localapi.RefusalExecNotAllowed:       ExitRunNotAuthorized,
	localapi.RefusalForbidden:            ExitRunNotAuthorized,
	localapi.RefusalWorkspaceBusy:        ExitRunBusy,
	localapi.RefusalResourceUnavailable:  ExitRunUnavailable,
	localapi.RefusalPolicyUnsupported:    ExitRunUnsupported,
	localapi.RefusalIsolationUnsupported: ExitRunUnsupported,
	localapi.RefusalEgressUnavailable:    ExitRunUnavailable,
	localapi.RefusalAuthorityUnavailable: ExitRunAuthority,
	localapi.RefusalAdmissionUnknown:     ExitRunUnknown,
	localapi.RefusalInternal:             ExitRunInternal,
}

// RefusalCodes are the refusal codes that have an exit status of their
// own, sorted.
func RefusalCodes() []string { return slices.Sorted(maps.Keys(runExitCodes)) }

// RefusalExitCode returns the exit status of a refusal with code.
func RefusalExitCode(code string) int {
	if c, ok := runExitCodes[code]; ok {
		return c
	}
	return ExitRunInternal
}

// Options are run's flags.
type Options struct {
	// Socket is --socket: "" for $MARSHAL_SOCKET, else the mode's.
	Socket    string
	Workspace string
	PTY       bool
	NoPTY     bool
	Timeout   time.Duration
	Explain   bool
	Output    string
	// ReportFD, when set, is the descriptor on which the marshalctl
	// that supervises this launch (superviseRun) learns its scope.
	ReportFD int
}

// Run runs argv as an agent: one request, then the exec of the plan
// marshald answers, or its refusal reported. It returns only when the
// agent was not started (or, under --timeout, once it ended).
func Run(ctx context.Context, s Streams, o Options, argv []string) error {
	switch {
	case o.Workspace == "":
		return UsageError("run needs a workspace: -w WORKSPACE")
	case o.PTY && o.NoPTY:
		return UsageError("--pty and --no-pty exclude each other")
	case o.Timeout < 0:
		return UsageError("--timeout %s: want a duration that is not negative", o.Timeout)
	case o.Output != "" && o.Output != "json":
		return UsageError("unknown output format %q (want json)", o.Output)
	}
	for _, a := range argv {
		if !utf8.ValidString(a) {
			return UsageError("argument %q is not UTF-8: the execution's meaning cannot hold it", a)
		}
	}
	socket, err := localapi.ResolveSocket(o.Socket)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if o.Timeout > 0 && !o.Explain && o.ReportFD == 0 {
		return superviseRun(ctx, s, socket, o, argv)
	}
	term, err := runTerminal(o)
	if err != nil {
		return err
	}
	env := os.Environ()
	req := localapi.RunRequest{
		Workspace: o.Workspace, Argv: argv, PTY: term.pty, TimeoutMS: o.Timeout.Milliseconds(),
		Env: make([][]byte, len(env)), Explain: o.Explain,
	}
	if o.Timeout > 0 && req.TimeoutMS == 0 {
		req.TimeoutMS = 1
	}
	for i, kv := range env {
		req.Env[i] = []byte(kv)
	}
	res, err := postRun(ctx, socket, &req)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(s.Err, "marshalctl: interrupted; nothing was started")
		return &ExitError{Code: ExitRunInterrupted, Silent: true}
	}
	if err != nil {
		return DaemonError(err)
	}
	switch {
	case res.Explain != nil:
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "    ")
		return enc.Encode(res.Explain)
	case res.Refusal != nil:
		return printRefusal(s, o.Output, res.Refusal, o.Workspace, argv)
	case res.Plan == nil:
		return &ExitError{Code: ExitFailure, Err: errors.New("marshald answered neither a plan nor a refusal")}
	}
	p := res.Plan
	if ctx.Err() != nil {
		// Interrupted while being launched: the agent is not started, and
		// its scope ends with this process.
		fmt.Fprintf(s.Err, "marshalctl: interrupted\nattempt %s, process %d, state cancelled; nothing was started\n", OrDash(p.Attempt), os.Getpid())
		return &ExitError{Code: ExitRunInterrupted, Silent: true}
	}
	if p.Unaccounted != "" {
		fmt.Fprintf(s.Err, "marshalctl: running unaccounted (%s): workspace %s participates optionally\n", p.Unaccounted, o.Workspace)
	}
	if o.ReportFD > 0 {
		reportLaunch(o.ReportFD, p)
	}
	RestoreInterrupts(ctx)
	err = execPlan(p, term)
	// Only a failed exec returns.
	fmt.Fprintf(s.Err, "%s: exec %s: %v\nattempt %s, process %d, state cancelled; nothing was started\n",
		localapi.RefusalInternal, p.Path, err, OrDash(p.Attempt), os.Getpid())
	return &ExitError{Code: ExitRunInternal, Silent: true}
}

// printRefusal prints a refusal of argv in workspace, as two lines on
// standard error or as a JSON object on standard output, and returns its
// exit status.
func printRefusal(s Streams, output string, r *localapi.Refusal, workspace string, argv []string) error {
	if output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "    ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		fmt.Fprint(s.Err, formatRefusal(r, workspace, argv))
	}
	return &ExitError{Code: RefusalExitCode(r.Code), Silent: true}
}

// formatRefusal is a refusal's two lines. A command that is not allowed
// or not found is named, and so is a workspace that is not ready:
// marshald's detail holds fixed phrases only, and the command and the
// workspace are the caller's own.
func formatRefusal(r *localapi.Refusal, workspace string, argv []string) string {
	detail := r.Detail
	switch {
	case r.Code == localapi.RefusalExecNotAllowed && len(argv) > 0:
		detail += fmt.Sprintf(": %q", argv[0])
	case r.Code == localapi.RefusalWorkspaceNotReady:
		detail += fmt.Sprintf(": %q", workspace)
	}
	return fmt.Sprintf("%s: %s\nattempt %s, process %d, state %s; nothing was started\n",
		r.Code, detail, OrDash(r.Attempt), r.Process, r.State)
}

// postRun makes the one request of a run on a connection of this
// process's own: marshald reads the caller's identity from it. An
// interruption shuts the connection down, which tells marshald that the
// caller went away.
func postRun(ctx context.Context, socket string, req *localapi.RunRequest) (*localapi.RunResult, error) {
	conn, err := client.Dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	body := appendRunRequest(nil, req)
	// From here on an interrupt must be caught: marshald is about to
	// hold a slot and create a scope for this process.
	AwaitInterrupts(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp, err := conn.RoundTrip("POST", localapi.RunPath, body)
	if err != nil {
		return nil, runIOError(ctx, err)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRunAnswer))
	if err != nil {
		return nil, runIOError(ctx, err)
	}
	if resp.StatusCode != 200 {
		e := &localapi.Error{}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			e = &localapi.Error{Code: localapi.CodeInternal, Message: strings.TrimSpace(resp.Status + " " + string(data))}
		}
		return nil, e
	}
	return decodeRunResult(data)
}

// maxRunAnswer bounds marshald's answer to a run: a plan holds the
// agent's environment.
const maxRunAnswer = 64 << 20

func runIOError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("marshald went away during the run request (%w); nothing was started", err)
}
