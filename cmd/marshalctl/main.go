// Command marshalctl checks manifests and controls marshald, kubectl-style:
// validate, get, describe, events, apply, diff, delete, doctor and
// identify.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/marshal-dev/marshal/cmd/marshalctl/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(cli.ExitCode(err))
}
