package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
)

// Exit codes shared by every command.
const (
	ExitOK      = runner.ExitOK      // success
	ExitNo      = runner.ExitNo      // the command worked and the answer is no: invalid manifests, differences
	ExitUsage   = runner.ExitUsage   // wrong flags or arguments
	ExitFailure = runner.ExitFailure // the command could not do its work (unreadable input, daemon unreachable)
)

// Streams are a command's standard input, output and error.
type Streams = runner.Streams

// ExitError carries the exit code a command ends with. Its message has
// already been printed when Silent is set.
type ExitError = runner.ExitError

func usageError(format string, args ...any) error { return runner.UsageError(format, args...) }

// ExitCode maps the error Run returned to the process exit code.
func ExitCode(err error) int { return runner.ExitCode(err) }

// Interrupts are the signals that cancel the context Run is given, as
// main catches them.
type Interrupts = runner.Interrupts

// WithInterrupts returns a copy of ctx that carries in to the commands.
func WithInterrupts(ctx context.Context, in Interrupts) context.Context {
	return runner.WithInterrupts(ctx, in)
}

// Run runs marshalctl with args (without the program name). It prints
// what the user needs to see, errors included, to streams; the returned
// error only decides the exit code.
func Run(ctx context.Context, args []string, s Streams) error {
	return execute(ctx, newRootCmd(s, commandToBuild(args)), args, s)
}

// execute runs root with args, as Run does.
func execute(ctx context.Context, root *cobra.Command, args []string, s Streams) error {
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	runner.Report(s.Err, err)
	return err
}

// commands are marshalctl's commands but completion, which needs all
// of them.
var commands = []struct {
	name string
	new  func(*globals, Streams) *cobra.Command
}{
	{"validate", func(_ *globals, s Streams) *cobra.Command { return newValidateCmd(s) }},
	{"get", newGetCmd},
	{"describe", newDescribeCmd},
	{"events", newEventsCmd},
	{"egress", newEgressCmd},
	{"apply", newApplyCmd},
	{"diff", newDiffCmd},
	{"delete", newDeleteCmd},
	{"wait", newWaitCmd},
	{"stop", newStopCmd},
	{"kill", newKillCmd},
	{"doctor", newDoctorCmd},
	{"identify", newIdentifyCmd},
	{"top", newTopCmd},
	{"run", newRunCmd},
	{"admin", newAdminCmd},
	{"version", newVersionCmd},
}

// commandToBuild returns the name of the command args run when that
// command can be built alone, else "". Building one command rather than
// the whole tree keeps a command's start short, run's above all; help,
// completion, cobra's hidden __complete and whatever is not a command
// name (a flag, a mistyped command that needs suggestions) get every
// command.
func commandToBuild(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--socket":
			i++ // its value
		case strings.HasPrefix(a, "--socket="):
		case strings.HasPrefix(a, "-"):
			// --help, "--", or a flag the root does not have: let
			// cobra see everything.
			return ""
		default:
			for _, c := range commands {
				if c.name == a {
					return a
				}
			}
			return ""
		}
	}
	return ""
}

// newRootCmd builds marshalctl with every command, or with only the one
// named.
func newRootCmd(s Streams, only string) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "marshalctl",
		Short: "Check manifests and control marshald",
		Long: `marshalctl checks marshal manifests and controls marshald, the daemon that
governs coding agents on this host.

It finds marshald by --socket, else $MARSHAL_SOCKET, else the socket of
this user's mode: /run/marshal/marshal.sock for root,
$XDG_RUNTIME_DIR/marshal.sock for anyone else.

marshalctl completion prints a script that completes commands, kinds and
object names in bash, zsh or fish.`,
		Example: `  marshalctl validate manifests/
  marshalctl apply -f manifests/
  marshalctl get workspaces
  marshalctl describe profile coder
  marshalctl --socket /run/marshal/marshal.sock doctor`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// A root with Args set reports a mistyped command as a usage error
		// instead of cobra's plain error.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	// The completion command below replaces cobra's default one.
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().StringVar(&g.socket, "socket", "",
		"marshald's socket (default $MARSHAL_SOCKET, else the socket of this user's mode)")
	for _, c := range commands {
		if only == "" || c.name == only {
			root.AddCommand(c.new(g, s))
		}
	}
	if only == "" {
		root.AddCommand(newCompletionCmd(s))
	}
	// Made now rather than at Execute, so that it gets an example too.
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Example = "  marshalctl help get\n  marshalctl help completion"
		}
	}
	addCompletions(root, g)
	return root
}

// minArgs, exactArgs and rangeArgs are cobra's argument checks,
// reporting usage errors.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError("%s needs at least %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("%s takes %d argument(s), got %d; usage: %s", cmd.CommandPath(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageError("%s takes %d to %d arguments, got %d; usage: %s", cmd.CommandPath(), lo, hi, len(args), cmd.UseLine())
		}
		return nil
	}
}
