package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const eventsLong = `Events lists what happened to objects, oldest first: conditions that
changed, manifests that stopped loading, agents that were stopped. A
repeated event is shown once, with its count.

--for KIND/NAME shows only the events of one object (profile/coder,
ws/webapp). With -w, events keeps printing new ones until interrupted
(Ctrl-C).

Exit status: 0 on success, 2 on a usage error, 3 when marshald cannot be
reached.`

func newEventsCmd(g *globals, s Streams) *cobra.Command {
	var (
		forObj string
		watch  bool
	)
	cmd := &cobra.Command{
		Use:   "events [--for KIND/NAME] [-w]",
		Short: "List events: what happened to objects",
		Long:  eventsLong,
		Example: `  marshalctl events
  marshalctl events --for workspace/docs
  marshalctl events -w`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseFor(forObj)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			evs, err := c.Events(ctx, ref, 0)
			if err != nil {
				return daemonError(err)
			}
			if len(evs) == 0 && !watch {
				fmt.Fprintln(s.Err, "No events found.")
				return nil
			}
			t := newTable("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
			rows := make([][]string, len(evs))
			for i, e := range evs {
				rows[i] = eventRow(e)
			}
			if err := t.write(s.Out, "", rows); err != nil {
				return err
			}
			if !watch {
				return nil
			}
			var after uint64
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			return watchEvents(ctx, s, c, ref, after, t)
		},
	}
	cmd.Flags().StringVar(&forObj, "for", "", "only the events of one object, as KIND/NAME")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the current events, print new ones until interrupted")
	return cmd
}

// parseFor parses --for KIND/NAME. A kind that is not a resource (the
// config dir's events) is taken as written.
func parseFor(s string) (v1alpha1.ObjectReference, error) {
	if s == "" {
		return v1alpha1.ObjectReference{}, nil
	}
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" {
		return v1alpha1.ObjectReference{}, usageError("--for %q: want KIND/NAME, such as profile/coder", s)
	}
	if res, ok := localapi.ResourceFor(kind); ok {
		kind = res.Kind
	}
	return v1alpha1.ObjectReference{Kind: kind, Name: name}, nil
}

func eventRow(e v1alpha1.Event) []string {
	return []string{seen(e.Count, e.FirstSeen, e.LastSeen), string(e.Type), e.Reason,
		strings.ToLower(e.Object.Kind) + "/" + e.Object.Name, firstLine(e.Message)}
}

func watchEvents(ctx context.Context, s Streams, c *client.Client, ref v1alpha1.ObjectReference, after uint64, t *table) error {
	err := c.WatchEvents(ctx, ref, after, func(e v1alpha1.Event) error {
		row := eventRow(e)
		t.fit(row)
		_, err := io.WriteString(s.Out, t.format(row))
		return err
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, client.ErrStreamEnded) {
		return &ExitError{Code: ExitFailure, Err: errors.New("marshald ended the watch: it is stopping or restarting; run the command again")}
	}
	return daemonError(err)
}
