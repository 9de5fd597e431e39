package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const egressLogLong = `Log prints the egress proxy's audit log: one line per decision (per
connection; per request for plain HTTP), oldest first, written when the
connection ends, so that it carries the bytes each way. Denials are
printed at once.

Each line names the agent's scope (or why the peer is in none), the
command that connected, the destination, the verdict and what decided it:
a rule of the profile by its index, the profile's default, a private
address no rule names, or a peer marshald did not launch.

--profile and --workspace keep only their agents' lines; --tail N starts
with the last N. With -f, log keeps printing new lines until interrupted
(Ctrl-C). -o json prints every record as one JSON object per line.

Exit status: 0 on success, 2 on a usage error, 3 when marshald cannot be
reached.`

func newEgressCmd(g *globals, s Streams) *cobra.Command {
	eg := &cobra.Command{
		Use:     "egress",
		Short:   "Inspect the egress proxy",
		Example: `  marshalctl egress log -f --workspace webapp`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown egress command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	eg.AddCommand(newEgressLogCmd(g, s))
	return eg
}

func newEgressLogCmd(g *globals, s Streams) *cobra.Command {
	q := client.EgressLogQuery{Tail: -1}
	var output string
	cmd := &cobra.Command{
		Use:   "log [-f] [-o json] [--profile P] [--workspace W] [--tail N]",
		Short: "Print the egress proxy's audit log",
		Long:  egressLogLong,
		Example: `  marshalctl egress log
  marshalctl egress log -f --workspace webapp
  marshalctl egress log --profile coder --tail 20 -o json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return usageError("unknown output format %q (want json)", output)
			}
			if cmd.Flags().Changed("tail") && q.Tail < 0 {
				return usageError("--tail %d: want 0 or more", q.Tail)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// The records kept are printed as one aligned table; a
			// follower's rows widen the columns as they come, as events
			// -w does.
			t := newTable(egressHeader...)
			var rows [][]string
			print := func(r localapi.EgressRecord) error {
				rows = append(rows, egressRow(r))
				return nil
			}
			switch {
			case output == "json":
				enc := json.NewEncoder(s.Out)
				print = func(r localapi.EgressRecord) error { return enc.Encode(r) }
			case q.Follow:
				print = streamRows(s.Out, t)
			}
			n := 0
			err = c.EgressLog(ctx, q, func(r localapi.EgressRecord) error {
				n++
				return print(r)
			})
			if len(rows) > 0 {
				if err := t.write(s.Out, "", rows); err != nil {
					return err
				}
			}
			switch {
			case q.Follow && errors.Is(err, context.Canceled) && ctx.Err() != nil:
				return nil
			case q.Follow && errors.Is(err, client.ErrStreamEnded):
				return &ExitError{Code: ExitFailure, Err: errors.New("marshald ended the log: it is stopping or restarting; run the command again")}
			case err != nil:
				return daemonError(err)
			}
			if n == 0 && output == "" {
				fmt.Fprintln(s.Err, "No egress records found.")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&q.Follow, "follow", "f", false, "after the records kept, print new ones until interrupted")
	f.StringVar(&q.Profile, "profile", "", "only the records of this profile's agents")
	f.StringVar(&q.Workspace, "workspace", "", "only the records of this workspace's agents")
	f.IntVar(&q.Tail, "tail", -1, "start with the last N records; -1 starts with every record kept")
	f.StringVarP(&output, "output", "o", "", "output format: json")
	mustRegister(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveNoFileComp)))
	for flag, kind := range map[string]string{"profile": "profiles", "workspace": "workspaces"} {
		res, _ := localapi.ResourceFor(kind)
		mustRegister(cmd.RegisterFlagCompletionFunc(flag, func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.nameCompletions(cmd.Context(), res, toComplete, ""), cobra.ShellCompDirectiveNoFileComp
		}))
	}
	return cmd
}

var egressHeader = []string{"TIME", "SCOPE", "COMMAND", "DESTINATION", "VERDICT", "BY", "OUT", "IN", "DURATION"}

// streamRows prints records as rows of t as they come, the header first.
func streamRows(w io.Writer, t *table) func(localapi.EgressRecord) error {
	header := false
	return func(r localapi.EgressRecord) error {
		row := egressRow(r)
		t.fit(row)
		if !header {
			header = true
			if _, err := io.WriteString(w, t.format(t.header)); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, t.format(row))
		return err
	}
}

func egressRow(r localapi.EgressRecord) []string {
	scope := r.Scope
	if scope == "" {
		scope = "(" + orDash(r.Unscoped) + ")"
	}
	dest := r.Host
	switch {
	case r.Protocol == "dns":
		// A question about a name, never a connection.
		dest = r.Host + " (dns)"
	case r.Port != 0:
		dest = hostPort(r.Host, r.Port)
	}
	by := r.Reason
	switch {
	case r.Rule != nil:
		by = "rule " + strconv.Itoa(*r.Rule)
	case r.Reason == "private_range":
		by = "private range"
	}
	if r.Error != "" {
		by = strings.TrimSpace(by + " " + r.Error)
	}
	return []string{
		clock(r.Time), scope, orDash(r.Command), orDash(dest), r.Verdict, orDash(by),
		bytesIEC(r.BytesOut), bytesIEC(r.BytesIn), time.Duration(r.Duration).Round(time.Millisecond).String(),
	}
}

// egressZone is the zone record times are printed in; tests fix it.
var egressZone = time.Local

// clock writes a record's time of day, with the date when it is not
// today.
func clock(t time.Time) string {
	t = t.In(egressZone)
	today := timeNow().In(egressZone)
	if y, m, d := t.Date(); y == today.Year() && m == today.Month() && d == today.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 02 15:04:05")
}

// hostPort joins a host and a port, bracketing an IPv6 address.
func hostPort(host string, port uint16) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(int(port))
	}
	return host + ":" + strconv.Itoa(int(port))
}
