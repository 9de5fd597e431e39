package cli

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
)

// The front reads every command line it takes as this CLI reads it, and
// leaves the rest to it.
func TestFrontReadsRunAsTheCLIDoes(t *testing.T) {
	taken := [][]string{
		{"run", "-w", "web", "--", "true"},
		{"run", "-w", "web", "true"},
		{"run", "--workspace", "web", "claude", "--resume"},
		{"run", "--workspace=web", "--", "git", "status", "--short"},
		{"--socket", "/s", "run", "-w", "web", "--", "true"},
		{"--socket=/s", "run", "--pty", "-w", "web", "--", "sh", "-c", "exit 3"},
		{"run", "--socket", "/s", "--no-pty", "-w", "web", "--", "true"},
		{"run", "--socket=/s", "-w", "a", "-w", "b", "--", "true"},
		{"run", "-w", "web", "make", "--", "-j4"},
		{"run", "-w", "--", "--", "true"},
		{"run", "-w", "web", "--", "--", "x"},
		{"run", "-w", "web", "--", "-x"},
		{"--socket", "run", "run", "-w", "web", "true"},
		{"run", "--pty", "--no-pty", "-w", "web", "true"},
		{"run", "-w", "", "--", "true"},
	}
	for _, args := range taken {
		o, argv, ok := runner.ParseFront(args)
		if !ok {
			t.Errorf("the front leaves %q", args)
			continue
		}
		want, wantArgv := parseRun(t, args)
		if o != want || !slices.Equal(argv, wantArgv) {
			t.Errorf("the front reads %q as %+v %q; the CLI as %+v %q", args, o, argv, want, wantArgv)
		}
	}
	left := [][]string{
		nil, {"run"}, {"run", "-w", "web"}, {"run", "-w", "web", "--"}, {"run", "-w"},
		{"get", "workspaces"}, {"version"}, {"--help"}, {"run", "--help"}, {"run", "-h"}, {"help", "run"},
		{"run", "--timeout", "1m", "-w", "web", "--", "true"}, {"run", "--explain", "-w", "web", "true"},
		{"run", "-o", "json", "-w", "web", "true"}, {"run", "--report-fd=3", "-w", "web", "true"},
		{"run", "-wweb", "true"}, {"run", "--pty=false", "-w", "web", "true"}, {"run", "-w", "web", "-", "x"},
		{"--socket"}, {"--sock", "/s", "run", "-w", "web", "true"}, {"-v", "run", "-w", "web", "true"},
		{"__complete", "run", "-w", ""},
	}
	for _, args := range left {
		if o, argv, ok := runner.ParseFront(args); ok {
			t.Errorf("the front takes %q as %+v %q; the CLI should read it", args, o, argv)
		}
	}
}

// parseRun reads args with the CLI's own run command, running nothing.
func parseRun(t *testing.T, args []string) (runner.Options, []string) {
	t.Helper()
	var (
		o     runner.Options
		argv  []string
		found bool
	)
	root := newRootCmd(Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}, "run")
	run, _, err := root.Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	run.RunE = func(cmd *cobra.Command, args []string) error {
		f := cmd.Flags()
		o.Socket = cmd.Flag("socket").Value.String()
		o.Workspace, _ = f.GetString("workspace")
		o.PTY, _ = f.GetBool("pty")
		o.NoPTY, _ = f.GetBool("no-pty")
		argv, found = args, true
		return nil
	}
	root.SetArgs(args)
	if err := root.Execute(); err != nil || !found {
		t.Fatalf("the CLI does not run %q: %v", args, err)
	}
	return o, argv
}
