package cli

import (
	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const runLong = `Run launches ARGV as an agent in a workspace. marshald checks that the
workspace is Ready and allows the command, holds one of its live-process
slots, asks the admission authority for a reservation when the workspace
participates, creates the launch's scope and moves marshalctl itself into
it. Only then does marshalctl exec ARGV, in the workspace root, with its
environment and the workspace's exec.env, MARSHAL_WORKSPACE,
MARSHAL_PROFILE, MARSHAL_NETWORK and MARSHAL_ISOLATION (under netns
isolation it execs marshal-confine, which makes the agent's network
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
  77  FORBIDDEN                       an agent's request: this marshalctl runs
                                      inside an agent whose profile does not
                                      grant a run into the workspace
                                      (spec.control.run); the message names
                                      the agent's scope
  75  WORKSPACE_BUSY                  every live-process slot is held
  69  RESOURCE_UNAVAILABLE            the request does not fit what the host has
                                      free, or its reservation expired
  78  RESOURCE_POLICY_UNSUPPORTED     a minimum level is above what this host
                                      gives
  78  ISOLATION_UNSUPPORTED           the profile's netns isolation (or the
                                      workspace's network policy none) cannot
                                      be had here: user namespaces are
                                      disabled or forbidden
  69  EGRESS_UNAVAILABLE              the profile declares egress and the proxy
                                      does not listen (the message says where
                                      and why; marshald --egress-address)
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

func newRunCmd(g *globals, s Streams) *cobra.Command {
	var o runner.Options
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
			o.Socket = g.socket
			return runner.Run(cmd.Context(), s, o, args)
		},
	}
	f := cmd.Flags()
	// Everything after the first argument is the agent's.
	f.SetInterspersed(false)
	f.StringVarP(&o.Workspace, "workspace", "w", "", "the workspace to run in (required)")
	f.BoolVar(&o.PTY, "pty", false, "run on this terminal (standard input must be one)")
	f.BoolVar(&o.NoPTY, "no-pty", false, "run without a terminal")
	f.DurationVar(&o.Timeout, "timeout", 0, "kill the agent's process tree after this long (e.g. 30m); 0 is none")
	f.BoolVar(&o.Explain, "explain", false, "print what the execution means and needs, as JSON; run nothing")
	f.StringVarP(&o.Output, "output", "o", "", "output format of a refusal: json")
	f.IntVar(&o.ReportFD, "report-fd", 0, "")
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
