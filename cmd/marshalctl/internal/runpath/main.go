// Command runpath is marshalctl run's launch and nothing around it: the
// runner package's one request and exec, without the commands, their
// flags and the interrupts marshalctl catches. It is the floor under
// marshalctl's share of a launch that any Go client of marshald's run
// request pays, timed beside marshalctl by BenchmarkRunLatency.
//
//	runpath SOCKET WORKSPACE ARGV...
package main

import (
	"context"
	"os"

	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
)

func main() {
	if len(os.Args) < 4 {
		os.Exit(2)
	}
	err := runner.Run(context.Background(), runner.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		runner.Options{Socket: os.Args[1], Workspace: os.Args[2]}, os.Args[3:])
	// Only a launch that did not start returns.
	runner.Report(os.Stderr, err)
	os.Exit(runner.ExitCode(err))
}
