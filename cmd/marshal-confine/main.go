//go:build linux && cgo

package main

/*
extern int marshal_confine_bridge;
extern int marshal_confine_listen_fd;
extern int marshal_confine_agent_fd;
extern const char *marshal_confine_socket;
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/marshal-dev/marshal/internal/bridge"
)

func main() {
	if C.marshal_confine_bridge == 0 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	// The bridge's standard streams are /dev/null: nothing is said.
	if err := serve(C.GoString(C.marshal_confine_socket), int(C.marshal_confine_listen_fd), int(C.marshal_confine_agent_fd)); err != nil {
		os.Exit(1)
	}
}

const usage = `usage: marshal-confine exec [--network none|host] [--socket PATH] [--port N] [--attempt ID] [--argv0 NAME] [--output json]
                            [--fs-default read|none] [--fs none|read|write[@FIELD]:PATH]... [--tmp PATH] -- PROGRAM [ARG...]
       marshal-confine check [--fs]`

// serve relays the listener's connections to socket until the agent
// exits.
func serve(socket string, listenFD, agentFD int) error {
	ln, err := net.FileListener(os.NewFile(uintptr(listenFD), "bridge"))
	if err != nil {
		return err
	}
	ctx, stop, err := bridge.UntilExit(context.Background(), agentFD)
	if err != nil {
		return err
	}
	defer stop()
	return bridge.Relay(ctx, ln, socket)
}
