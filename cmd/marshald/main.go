// Command marshald is the marshal daemon: it reconciles the host's agents
// with the manifests in its config directory and serves marshalctl.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/marshal-dev/marshal/internal/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := daemon.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
