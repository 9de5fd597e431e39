package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Exit statuses of a refused run, one per refusal code, from sysexits.h.
const (
	ExitRunUnavailable   = 69 // RESOURCE_UNAVAILABLE (EX_UNAVAILABLE)
	ExitRunInternal      = 70 // INTERNAL (EX_SOFTWARE)
	ExitRunUnknown       = 71 // ADMISSION_UNKNOWN (EX_OSERR)
	ExitRunBusy          = 75 // WORKSPACE_BUSY (EX_TEMPFAIL)
	ExitRunAuthority     = 76 // RESOURCE_AUTHORITY_UNAVAILABLE (EX_PROTOCOL)
	ExitRunNotAuthorized = 77 // WORKSPACE_NOT_READY, EXEC_NOT_ALLOWED (EX_NOPERM)
	ExitRunUnsupported   = 78 // RESOURCE_POLICY_UNSUPPORTED, ISOLATION_UNSUPPORTED (EX_CONFIG)
	// ExitRunInterrupted is the status of a run interrupted before the
	// agent was started: 128 + SIGINT, as a shell reports it.
	ExitRunInterrupted = 130
)

// runExitCodes maps each refusal code to its exit status.
var runExitCodes = map[string]int{
	localapi.RefusalWorkspaceNotReady:    ExitRunNotAuthorized,
	localapi.RefusalExecNotAllowed:       ExitRunNotAuthorized,
	localapi.RefusalWorkspaceBusy:        ExitRunBusy,
	localapi.RefusalResourceUnavailable:  ExitRunUnavailable,
	localapi.RefusalPolicyUnsupported:    ExitRunUnsupported,
	localapi.RefusalIsolationUnsupported: ExitRunUnsupported,
	localapi.RefusalAuthorityUnavailable: ExitRunAuthority,
	localapi.RefusalAdmissionUnknown:     ExitRunUnknown,
	localapi.RefusalInternal:             ExitRunInternal,
}

// runExitCode returns the exit status of a refusal with code.
func runExitCode(code string) int {
	if c, ok := runExitCodes[code]; ok {
		return c
	}
	return ExitRunInternal
}

const runLong = `Run launches ARGV as an agent in a workspace. marshald checks that the
workspace is Ready and allows the command, holds one of its live-process
slots, asks the admission authority for a reservation when the workspace
participates, creates the launch's scope and moves marshalctl itself into
it. Only then does marshalctl exec ARGV, in the workspace root, with its
environment and the workspace's exec.env, MARSHAL_WORKSPACE,
MARSHAL_PROFILE, MARSHAL_NETWORK and MARSHAL_ISOLATION (under netns
isolation it execs marshal-netns, which makes the agent's network
namespace and the bridge to the egress proxy, then execs ARGV in its
place), and the proxy variables of the profile's egress: the agent is
inside its scope from
its first instruction, and so is every process it starts. Its standard
streams, terminal, job control, signals and exit status are its own:
marshalctl run exits with the agent's status.

A refusal comes before anything is started. It prints, on standard error,

  CODE: DETAIL
  attempt ID, process PID, state STATE; nothing was started

where STATE says what became of the admission attempt (not_asked,
not_recorded, denied, cancelled, expired or unknown) and ID is - when no
attempt was made, and exits with the code's status:

  77  WORKSPACE_NOT_READY             the workspace is not declared, not Ready,
                                      or its root is not a directory
  77  EXEC_NOT_ALLOWED                exec is not allowed, argv[0] is not on the
                                      workspace's list or is not found on PATH;
                                      the message names argv[0]
  75  WORKSPACE_BUSY                  every live-process slot is held
  69  RESOURCE_UNAVAILABLE            the request does not fit what the host has
                                      free, or its reservation expired
  78  RESOURCE_POLICY_UNSUPPORTED     a minimum level is above what this host
                                      gives
  78  ISOLATION_UNSUPPORTED           the profile's netns isolation (or the
                                      workspace's network policy none) cannot
                                      be had here: user namespaces are
                                      disabled or forbidden
  76  RESOURCE_AUTHORITY_UNAVAILABLE  the admission authority cannot decide
  71  ADMISSION_UNKNOWN               the admission answer was lost
  70  INTERNAL                        anything else

With -o json a refusal is printed on standard output as one JSON object
(code, detail, attempt, process, state) instead.

A workspace whose participation is optional runs the agent without a
reservation when admission is denied or cannot answer, and says so on
standard error.

--pty says that the agent runs on this terminal (standard input must be
one); --no-pty that it does not: its standard input is then /dev/null if
it was a terminal, and it has no controlling terminal. Without either,
the agent runs on a terminal when standard input is one. The choice is
part of the execution's meaning, as are the command, the workspace, the
environment it adds and the timeout.

--timeout kills the agent's whole process tree when it expires; run
then says so on standard error and exits with 137. To be there to say
it, marshalctl starts the launch as a child of its own and waits for it
outside the scope; the agent, inside, is the child's exec as without a
timeout, and the child's exit status is run's.

--explain prints, as JSON, what the execution means, its digest and what
admission would need (the request, the minimum levels beside what this
host gives, whether it fits what is free now), without admitting or
running anything.

Other exit statuses: 2 on a usage error, 3 when marshald cannot be
reached or fails, 130 when interrupted before the agent was started.`

// runOptions are run's flags.
type runOptions struct {
	workspace string
	pty       bool
	noPTY     bool
	timeout   time.Duration
	explain   bool
	output    string
	// reportFD, when set, is the descriptor on which the marshalctl
	// that supervises this launch (superviseRun) learns its scope.
	reportFD int
}

func newRunCmd(g *globals, s Streams) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -w WORKSPACE [--pty|--no-pty] [--timeout D] [--explain] -- ARGV...",
		Short: "Run a command as an agent in a workspace, inside its own scope",
		Long:  runLong,
		Example: `  marshalctl run -w webapp -- claude
  marshalctl run -w webapp --timeout 30m -- npm test
  marshalctl run -w webapp --no-pty -- make lint
  marshalctl run --explain -w webapp -- git status`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAgent(cmd.Context(), g, s, o, args)
		},
	}
	f := cmd.Flags()
	// Everything after the first argument is the agent's.
	f.SetInterspersed(false)
	f.StringVarP(&o.workspace, "workspace", "w", "", "the workspace to run in (required)")
	f.BoolVar(&o.pty, "pty", false, "run on this terminal (standard input must be one)")
	f.BoolVar(&o.noPTY, "no-pty", false, "run without a terminal")
	f.DurationVar(&o.timeout, "timeout", 0, "kill the agent's process tree after this long (e.g. 30m); 0 is none")
	f.BoolVar(&o.explain, "explain", false, "print what the execution means and needs, as JSON; run nothing")
	f.StringVarP(&o.output, "output", "o", "", "output format of a refusal: json")
	f.IntVar(&o.reportFD, "report-fd", 0, "")
	mustRegister(f.MarkHidden("report-fd"))
	mustRegister(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveNoFileComp)))
	mustRegister(cmd.RegisterFlagCompletionFunc("workspace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		res, _ := localapi.ResourceFor("workspaces")
		return g.nameCompletions(cmd.Context(), res, toComplete, ""), cobra.ShellCompDirectiveNoFileComp
	}))
	cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return cmd
}

// runAgent runs the command: one request, then exec or a refusal.
func runAgent(ctx context.Context, g *globals, s Streams, o runOptions, argv []string) error {
	switch {
	case o.workspace == "":
		return usageError("run needs a workspace: -w WORKSPACE")
	case o.pty && o.noPTY:
		return usageError("--pty and --no-pty exclude each other")
	case o.timeout < 0:
		return usageError("--timeout %s: want a duration that is not negative", o.timeout)
	case o.output != "" && o.output != "json":
		return usageError("unknown output format %q (want json)", o.output)
	}
	for _, a := range argv {
		if !utf8.ValidString(a) {
			return usageError("argument %q is not UTF-8: the execution's meaning cannot hold it", a)
		}
	}
	socket, err := localapi.ResolveSocket(g.socket)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if o.timeout > 0 && !o.explain && o.reportFD == 0 {
		return superviseRun(ctx, s, socket, o, argv)
	}
	term, err := runTerminal(o)
	if err != nil {
		return err
	}
	env := os.Environ()
	req := localapi.RunRequest{
		Workspace: o.workspace, Argv: argv, PTY: term.pty, TimeoutMS: o.timeout.Milliseconds(),
		Env: make([][]byte, len(env)), Explain: o.explain,
	}
	if o.timeout > 0 && req.TimeoutMS == 0 {
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
		return daemonError(err)
	}
	switch {
	case res.Explain != nil:
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "    ")
		return enc.Encode(res.Explain)
	case res.Refusal != nil:
		return printRefusal(s, o.output, res.Refusal, argv)
	case res.Plan == nil:
		return &ExitError{Code: ExitFailure, Err: errors.New("marshald answered neither a plan nor a refusal")}
	}
	p := res.Plan
	if ctx.Err() != nil {
		// Interrupted while being launched: the agent is not started, and
		// its scope ends with this process.
		fmt.Fprintf(s.Err, "marshalctl: interrupted\nattempt %s, process %d, state cancelled; nothing was started\n", orDash(p.Attempt), os.Getpid())
		return &ExitError{Code: ExitRunInterrupted, Silent: true}
	}
	if p.Unaccounted != "" {
		fmt.Fprintf(s.Err, "marshalctl: running unaccounted (%s): workspace %s participates optionally\n", p.Unaccounted, o.workspace)
	}
	if o.reportFD > 0 {
		reportLaunch(o.reportFD, p)
	}
	restoreInterrupts(ctx)
	err = execPlan(p, term)
	// Only a failed exec returns.
	fmt.Fprintf(s.Err, "%s: exec %s: %v\nattempt %s, process %d, state cancelled; nothing was started\n",
		localapi.RefusalInternal, p.Path, err, orDash(p.Attempt), os.Getpid())
	return &ExitError{Code: ExitRunInternal, Silent: true}
}

// printRefusal prints a refusal of argv, as two lines on standard error
// or as a JSON object on standard output, and returns its exit status.
func printRefusal(s Streams, output string, r *localapi.Refusal, argv []string) error {
	if output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "    ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		fmt.Fprint(s.Err, formatRefusal(r, argv))
	}
	return &ExitError{Code: runExitCode(r.Code), Silent: true}
}

// formatRefusal is a refusal's two lines. A command that is not allowed
// or not found is named: marshald's detail holds fixed phrases only, and
// the command is the caller's own.
func formatRefusal(r *localapi.Refusal, argv []string) string {
	detail := r.Detail
	if r.Code == localapi.RefusalExecNotAllowed && len(argv) > 0 {
		detail += fmt.Sprintf(": %q", argv[0])
	}
	return fmt.Sprintf("%s: %s\nattempt %s, process %d, state %s; nothing was started\n",
		r.Code, detail, orDash(r.Attempt), r.Process, r.State)
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
	awaitInterrupts(ctx)
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
