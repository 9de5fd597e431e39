//go:build linux && cgo

package main

/*
extern int marshal_confine_bridge;
extern int marshal_confine_listen_fd;
extern int marshal_confine_agent_fd;
extern int marshal_confine_dns_fd;
extern const char *marshal_confine_socket;
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/marshal-dev/marshal/internal/bridge"
)

func main() {
	if C.marshal_confine_bridge == 0 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	// The bridge's standard streams are /dev/null: nothing is said.
	if err := serve(C.GoString(C.marshal_confine_socket), int(C.marshal_confine_listen_fd), int(C.marshal_confine_agent_fd), int(C.marshal_confine_dns_fd)); err != nil {
		os.Exit(1)
	}
}

const usage = `usage: marshal-confine exec [--network none|host] [--socket PATH] [--port N] [--attempt ID] [--argv0 NAME] [--output json]
                            [--fs-default read|none] [--fs none|read|write[@FIELD]:PATH]... [--tmp PATH] [--hide PATH]... -- PROGRAM [ARG...]
       marshal-confine check [--fs]`

// serve relays the listener's connections to socket, and answers the
// agent's DNS queries, until the agent exits.
func serve(socket string, listenFD, agentFD, dnsFD int) error {
	ln, err := net.FileListener(os.NewFile(uintptr(listenFD), "bridge"))
	if err != nil {
		return err
	}
	pc, err := net.FilePacketConn(os.NewFile(uintptr(dnsFD), "resolver"))
	if err != nil {
		return err
	}
	ctx, stop, err := bridge.UntilExit(context.Background(), agentFD)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg     sync.WaitGroup
		dnsErr error
	)
	wg.Go(func() {
		// A resolver that fails ends the bridge: the agent's
		// namespace holds nothing half-working.
		if dnsErr = bridge.ServeDNS(ctx, pc, bridge.DNSOptions{Socket: socket}); dnsErr != nil {
			cancel()
		}
	})
	err = bridge.Relay(ctx, ln, socket)
	cancel()
	wg.Wait()
	return errors.Join(err, dnsErr)
}
