package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0 // success
	ExitNo      = 1 // the command worked and the answer is no: invalid manifests, differences
	ExitUsage   = 2 // wrong flags or arguments
	ExitFailure = 3 // the command could not do its work (unreadable input, daemon unreachable)
)

// Streams are a command's standard input, output and error.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// ExitError carries the exit code a command ends with. Its message has
// already been printed when Silent is set.
type ExitError struct {
	Code   int
	Err    error
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCode maps the error Run returned to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

// Run runs marshalctl with args (without the program name). It prints
// what the user needs to see, errors included, to streams; the returned
// error only decides the exit code.
func Run(ctx context.Context, args []string, s Streams) error {
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *ExitError
	if err != nil && !(errors.As(err, &ee) && ee.Silent) {
		fmt.Fprintf(s.Err, "marshalctl: %v\n", err)
		if ExitCode(err) == ExitUsage {
			fmt.Fprintln(s.Err, "Run 'marshalctl --help' for usage.")
		}
	}
	return err
}

func newRootCmd(s Streams) *cobra.Command {
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
	root.AddCommand(
		newValidateCmd(s),
		newGetCmd(g, s),
		newDescribeCmd(g, s),
		newEventsCmd(g, s),
		newApplyCmd(g, s),
		newDiffCmd(g, s),
		newDeleteCmd(g, s),
		newDoctorCmd(g, s),
		newIdentifyCmd(g, s),
		newRunCmd(g, s),
		newAdminCmd(g, s),
		newVersionCmd(g, s),
		newCompletionCmd(s),
	)
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
