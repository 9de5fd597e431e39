package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/localapi"
)

const stopLong = `Stop ends an agent, as kubectl deletes a pod: marshald sends SIGTERM to
every process of the agent's scope, and SIGKILL to the whole tree once
the grace period has passed (--grace, 10s by default) if any is left.
Kill sends SIGKILL at once.

SCOPE is the agent's scope, as marshalctl get agents -o wide shows it,
or as get agents shortens it (marshal-coder-3f9a0c1e….scope), or the
launch's ID, or any prefix of the scope or ID that names one live agent
alone, as docker takes a container's ID; agent/SCOPE also does. A prefix
that names several agents is refused with their list. With --wait (the default) the command returns once
the scope is empty and marshald no longer lists the agent; its
reservation and slot are released as for any agent that ends, once its
processes are gone.

A marshald that stops during the grace period does not send the SIGKILL:
stop the agent again.

Exit status: 0 when the agent was stopped, 1 when there is no such agent
or the wait timed out, 2 on a usage error, 3 when marshald cannot be
reached.`

func newStopCmd(g *globals, s Streams) *cobra.Command {
	var (
		grace   time.Duration
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "stop agent SCOPE [--grace D] [--wait=false]",
		Short: "End an agent: SIGTERM to its processes, then SIGKILL after a grace period",
		Long:  stopLong,
		Example: `  marshalctl stop agent marshal-coder-3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c.scope
  marshalctl stop agent marshal-coder-3f9a0c1e….scope
  marshalctl stop agent/3f9a0c1e --grace 30s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace <= 0 {
				return usageError("--grace %s: want a positive duration; marshalctl kill agent kills at once", grace)
			}
			return stopAgent(cmd.Context(), g, s, args, grace, wait, timeout)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long the agent has to end after SIGTERM before SIGKILL")
	cmd.Flags().BoolVar(&wait, "wait", true, "return once the agent has ended")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up waiting after this long; 0 waits as long as it takes")
	return cmd
}

func newKillCmd(g *globals, s Streams) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:     "kill agent SCOPE [--wait=false]",
		Short:   "End an agent at once: SIGKILL to every process of its scope",
		Long:    strings.Replace(stopLong, "Stop ends an agent", "Kill ends an agent at once; stop gives it time. Stop ends an agent", 1),
		Example: `  marshalctl kill agent marshal-coder-3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c.scope`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return stopAgent(cmd.Context(), g, s, args, 0, wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "return once the agent has ended")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up waiting after this long; 0 waits as long as it takes")
	return cmd
}

// stopAgent stops (grace > 0) or kills the agent args name, and waits
// until it is gone when asked.
func stopAgent(ctx context.Context, g *globals, s Streams, args []string, grace time.Duration, wait bool, timeout time.Duration) error {
	if timeout < 0 {
		return usageError("--timeout %s: want a duration that is not negative", timeout)
	}
	t, err := parseTargets(args, "")
	if err != nil {
		return err
	}
	if len(t.names) != 1 || t.names[0].res.Kind != "Agent" {
		return usageError("name one agent: agent SCOPE, as marshalctl get agents shows it, or its ID")
	}
	o := t.names[0]
	c, err := g.client()
	if err != nil {
		return err
	}
	if o.name, err = resolveAgent(ctx, c, o.name); err != nil {
		return err
	}
	res, err := c.Stop(ctx, localapi.StopRequest{Agent: o.name, GraceMS: grace.Milliseconds()})
	if err != nil {
		return notFoundHint(daemonError(err), o.res)
	}
	done := "stopped"
	if grace == 0 {
		done = "killed"
	}
	if !wait {
		fmt.Fprintf(s.Out, "%s: %s sent\n", o.ref(), res.Signal)
		return nil
	}
	return awaitEach(ctx, c, []namedObject{o}, waitDeleted, timeout, func(o namedObject) {
		fmt.Fprintf(s.Out, "%s %s\n", o.ref(), done)
	})
}
