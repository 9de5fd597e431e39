// Command marshalctl checks manifests and controls marshald, kubectl-style:
// validate, get, describe, events, apply, diff, delete, doctor and
// identify.
package main

import (
	"context"
	"os"

	"github.com/marshal-dev/marshal/cmd/marshalctl/cli"
	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/interrupt"
)

func main() {
	ctx, stop := interrupt.NotifyContext(context.Background())
	ctx = cli.WithInterrupts(ctx, interrupt.Caught{})
	err := cli.Run(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(cli.ExitCode(err))
}
