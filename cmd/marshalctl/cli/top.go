package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const topLong = `Top shows what the live agents use: CPU over the last interval (100% is
one core), memory and processes (pids) now, and their egress through the
proxy: connections and bytes out/in, counted from the proxy's audit log
(which records a connection when it ends). "top workspaces" and "top
profiles" add up the agents of each.

Usage is what marshald reads from each scope's cgroup files when asked,
as get agents shows it; marshald polls nothing for top. marshalctl asks
twice, --interval apart, for the CPU use between. With -w it goes on
printing a table every interval until interrupted (Ctrl-C).

Rows are sorted by --sort: cpu (the default), memory, pids or egress,
highest first.

Exit status: 0 on success, 2 on a usage error, 3 when marshald cannot be
reached.`

func newTopCmd(g *globals, s Streams) *cobra.Command {
	var (
		watch    bool
		interval time.Duration
		sortBy   string
	)
	cmd := &cobra.Command{
		Use:   "top [agents|workspaces|profiles] [-w] [--interval D] [--sort cpu|memory|pids|egress]",
		Short: "Show the CPU, memory, pids and egress of live agents",
		Long:  topLong,
		Example: `  marshalctl top
  marshalctl top workspaces -w --interval 5s`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("top takes at most one of agents, workspaces, profiles")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			by := "agents"
			if len(args) == 1 {
				by = args[0]
			}
			switch by {
			case "agent", "agents":
				by = "agents"
			case "workspace", "workspaces":
				by = "workspaces"
			case "profile", "profiles":
				by = "profiles"
			default:
				return usageError("top %q: want agents, workspaces or profiles", by)
			}
			if interval <= 0 {
				return usageError("--interval must be above zero")
			}
			if !slices.Contains([]string{"cpu", "memory", "pids", "egress"}, sortBy) {
				return usageError("--sort %q: want cpu, memory, pids or egress", sortBy)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			return runTop(cmd.Context(), c, s.Out, topOptions{by: by, sort: sortBy, interval: interval, watch: watch})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print a new table every interval until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "the time between samples: CPU use is measured over it")
	cmd.Flags().StringVar(&sortBy, "sort", "cpu", "sort rows by cpu, memory, pids or egress, highest first")
	return cmd
}

type topOptions struct {
	by, sort string
	interval time.Duration
	watch    bool
}

// topSample is what the agents used at one moment.
type topSample struct {
	at     time.Time
	agents map[string]v1alpha1.Agent
}

// topRow is one line of top, before it is formatted.
type topRow struct {
	name, profile, workspace string
	cpuUsec                  int64 // CPU used over the interval
	memory, pids             int64
	conns, out, in           int64
	agents                   int
}

func runTop(ctx context.Context, c *client.Client, w io.Writer, o topOptions) error {
	prev, err := sampleAgents(ctx, c)
	if err != nil {
		return daemonError(err)
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for first := true; ; first = false {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur, err := sampleAgents(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return daemonError(err)
		}
		egress := egressByScope(ctx, c)
		if !first {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := writeTop(w, o, prev, cur, egress); err != nil {
			return err
		}
		if !o.watch {
			return nil
		}
		prev = cur
	}
}

func sampleAgents(ctx context.Context, c *client.Client) (topSample, error) {
	items, err := c.List(ctx, "agents")
	if err != nil {
		return topSample{}, err
	}
	s := topSample{at: time.Now(), agents: make(map[string]v1alpha1.Agent, len(items))}
	for _, raw := range items {
		var a v1alpha1.Agent
		if err := json.Unmarshal(raw, &a); err != nil {
			return topSample{}, fmt.Errorf("an agent from marshald: %w", err)
		}
		if a.Status.Populated {
			s.agents[a.Metadata.Name] = a
		}
	}
	return s, nil
}

// egressByScope adds up the audit log's connections and bytes per
// scope; nil when the proxy does not run or its log cannot be read.
func egressByScope(ctx context.Context, c *client.Client) map[string]*topRow {
	out := map[string]*topRow{}
	err := c.EgressLog(ctx, client.EgressLogQuery{Tail: -1}, func(r localapi.EgressRecord) error {
		if r.Scope == "" {
			return nil
		}
		e := out[r.Scope]
		if e == nil {
			e = &topRow{}
			out[r.Scope] = e
		}
		e.conns++
		e.out += r.BytesOut
		e.in += r.BytesIn
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

func writeTop(w io.Writer, o topOptions, prev, cur topSample, egress map[string]*topRow) error {
	rows := map[string]*topRow{}
	var order []string
	for name, a := range cur.agents {
		key := name
		switch o.by {
		case "workspaces":
			key = orDash(a.Status.Workspace)
		case "profiles":
			key = a.Status.Profile
		}
		r := rows[key]
		if r == nil {
			r = &topRow{name: key, profile: a.Status.Profile, workspace: orDash(a.Status.Workspace)}
			if o.by == "agents" {
				r.name = shortScope(name, a.Status.ID)
			}
			rows[key] = r
			order = append(order, key)
		}
		r.agents++
		if p, ok := prev.agents[name]; ok {
			r.cpuUsec += max(0, a.Status.Usage.CPUUsec-p.Status.Usage.CPUUsec)
		}
		r.memory += a.Status.Usage.MemoryBytes
		r.pids += a.Status.Usage.Tasks
		if e := egress[name]; e != nil {
			r.conns, r.out, r.in = r.conns+e.conns, r.out+e.out, r.in+e.in
		}
	}
	key := func(r *topRow) int64 {
		switch o.sort {
		case "memory":
			return r.memory
		case "pids":
			return r.pids
		case "egress":
			return r.out + r.in
		}
		return r.cpuUsec
	}
	slices.SortFunc(order, func(a, b string) int {
		return cmp.Or(cmp.Compare(key(rows[b]), key(rows[a])), cmp.Compare(a, b))
	})
	wall := cur.at.Sub(prev.at)
	var t *table
	switch o.by {
	case "agents":
		t = newTable("SCOPE", "PROFILE", "WORKSPACE", "CPU", "MEMORY", "PIDS", "EGRESS CONN", "EGRESS OUT/IN")
	case "workspaces":
		t = newTable("WORKSPACE", "PROFILE", "AGENTS", "CPU", "MEMORY", "PIDS", "EGRESS CONN", "EGRESS OUT/IN")
	default:
		t = newTable("PROFILE", "AGENTS", "CPU", "MEMORY", "PIDS", "EGRESS CONN", "EGRESS OUT/IN")
	}
	cells := make([][]string, 0, len(order))
	for _, k := range order {
		r := rows[k]
		usage := []string{cpuShare(r.cpuUsec, wall), bytesIEC(r.memory), fmt.Sprint(r.pids)}
		eg := []string{"-", "-"}
		if egress != nil {
			eg = []string{fmt.Sprint(r.conns), bytesIEC(r.out) + "/" + bytesIEC(r.in)}
		}
		var row []string
		switch o.by {
		case "agents":
			row = append([]string{r.name, r.profile, r.workspace}, usage...)
		case "workspaces":
			row = append([]string{r.name, r.profile, fmt.Sprint(r.agents)}, usage...)
		default:
			row = append([]string{r.name, fmt.Sprint(r.agents)}, usage...)
		}
		cells = append(cells, append(row, eg...))
	}
	if len(cells) == 0 {
		_, err := fmt.Fprintln(w, "No live agents.")
		return err
	}
	return t.write(w, "", cells)
}

// cpuShare is CPU time used over wall time, as a percentage of one core.
func cpuShare(usec int64, wall time.Duration) string {
	if wall <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", float64(usec)*1e3/float64(wall.Nanoseconds())*100)
}
