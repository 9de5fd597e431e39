// Command marshalctl checks manifests and controls marshald, kubectl-style:
// validate, get, describe, events, apply, diff, delete, doctor, identify
// and run.
//
// This program is marshalctl's front, and starts on every agent launch:
// it runs `marshalctl run -w W -- ARGV` itself (package runner), linking
// nothing else of the CLI, and execs marshalctl-cli, installed beside
// it, with the same arguments for any other command line, which it
// reads as it always did.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/interrupt"
	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
)

// wholeCLI is the program with every command, beside this one.
const wholeCLI = "marshalctl-cli"

func main() {
	if o, argv, ok := runner.ParseFront(os.Args[1:]); ok {
		ctx, stop := interrupt.NotifyContext(context.Background())
		ctx = runner.WithInterrupts(ctx, interrupt.Caught{})
		err := runner.Run(ctx, runner.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, o, argv)
		runner.Report(os.Stderr, err)
		stop()
		os.Exit(runner.ExitCode(err))
	}
	err := execWholeCLI()
	fmt.Fprintf(os.Stderr, "marshalctl: %v\n", err)
	os.Exit(runner.ExitFailure)
}

// execWholeCLI execs marshalctl-cli with this process's arguments and
// the signal dispositions it started with. It returns only when that
// fails. An interrupt that came first ends this process with 130, as a
// shell reports SIGINT: marshalctl-cli would never see it.
func execWholeCLI() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding %s: %w", wholeCLI, err)
	}
	path := filepath.Join(filepath.Dir(self), wholeCLI)
	caught := interrupt.Caught{}
	<-caught.Ready()
	caught.Restore()
	if _, ok := caught.Pending(); ok {
		fmt.Fprintln(os.Stderr, "marshalctl: interrupted")
		os.Exit(runner.ExitRunInterrupted)
	}
	err = syscall.Exec(path, os.Args, os.Environ())
	return fmt.Errorf("%s: %w; marshalctl runs its commands but run with %s, installed beside it", path, err, wholeCLI)
}
