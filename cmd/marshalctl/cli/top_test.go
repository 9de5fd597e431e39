package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func topAgent(name, profile, workspace string, cpuUsec, memory, tasks int64) v1alpha1.Agent {
	var a v1alpha1.Agent
	a.Metadata.Name = name
	a.Status.Profile, a.Status.Workspace, a.Status.Populated = profile, workspace, true
	a.Status.Usage = v1alpha1.AgentUsage{CPUUsec: cpuUsec, MemoryBytes: memory, Tasks: tasks}
	return a
}

// top's rows: CPU is the use between the samples over the time between
// them, rows of a workspace or profile add up its agents, and the sort
// puts the highest first.
func TestTopTables(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	sample := func(at time.Time, agents ...v1alpha1.Agent) topSample {
		s := topSample{at: at, agents: map[string]v1alpha1.Agent{}}
		for _, a := range agents {
			s.agents[a.Metadata.Name] = a
		}
		return s
	}
	prev := sample(at,
		topAgent("a.scope", "coder", "web", 1_000_000, 1<<20, 3),
		topAgent("b.scope", "coder", "web", 0, 4<<20, 1),
		topAgent("c.scope", "writer", "docs", 0, 2<<20, 1))
	cur := sample(at.Add(2*time.Second),
		topAgent("a.scope", "coder", "web", 2_000_000, 1<<20, 3), // 1 s of CPU in 2 s: 50%
		topAgent("b.scope", "coder", "web", 3_000_000, 4<<20, 1), // 150%
		topAgent("c.scope", "writer", "docs", 0, 2<<20, 1))
	egress := map[string]*topRow{"a.scope": {conns: 2, out: 1024, in: 4096}}
	for _, tc := range []struct {
		name string
		o    topOptions
		want string
	}{
		{"agents_by_cpu", topOptions{by: "agents", sort: "cpu"}, `
SCOPE     PROFILE   WORKSPACE   CPU    MEMORY   PIDS   EGRESS CONN   EGRESS OUT/IN
b.scope   coder     web         150%   4MiB     1      0             0B/0B
a.scope   coder     web         50%    1MiB     3      2             1KiB/4KiB
c.scope   writer    docs        0%     2MiB     1      0             0B/0B
`},
		{"workspaces_by_memory", topOptions{by: "workspaces", sort: "memory"}, `
WORKSPACE   PROFILE   AGENTS   CPU    MEMORY   PIDS   EGRESS CONN   EGRESS OUT/IN
web         coder     2        200%   5MiB     4      2             1KiB/4KiB
docs        writer    1        0%     2MiB     1      0             0B/0B
`},
		{"profiles_by_pids", topOptions{by: "profiles", sort: "pids"}, `
PROFILE   AGENTS   CPU    MEMORY   PIDS   EGRESS CONN   EGRESS OUT/IN
coder     2        200%   5MiB     4      2             1KiB/4KiB
writer    1        0%     2MiB     1      0             0B/0B
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeTop(&b, tc.o, prev, cur, egress); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != strings.TrimPrefix(tc.want, "\n") {
				t.Errorf("writeTop(%+v) =\n%s\nwant\n%s", tc.o, got, tc.want)
			}
		})
	}
}
