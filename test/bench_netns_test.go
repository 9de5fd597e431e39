//go:build linux

package test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// benchNetnsManifests are two profiles alike but for their isolation,
// both with egress, and a workspace of each.
const benchNetnsManifests = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: plain}
spec:
  egress: {default: allow}
---
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: sandboxed}
spec:
  isolation: netns
  egress: {default: allow}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: plain}
spec: {root: %[1]s, profile: plain, processes: {max_live: 64}}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: sandboxed}
spec: {root: %[1]s, profile: sandboxed, processes: {max_live: 64}}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: offline}
spec: {root: %[1]s, profile: plain, network: {policy: none}, processes: {max_live: 64}}
`

// BenchmarkRunNetns times `marshalctl run -w W -- /bin/true`, whole
// process, for the same launch without netns isolation (cgroup), with
// it (a bridge to the proxy), and with network policy none (a namespace,
// no bridge), against bare /bin/true and `bwrap --unshare-net` (the
// host's root read-only, as bwrap needs one) measured in the same run,
// interleaved. It reports medians and 90th percentiles in milliseconds,
// and what netns isolation adds to the same launch (the target: at most
// 1.5 ms) and what bwrap adds to the bare exec.
func BenchmarkRunNetns(b *testing.B) {
	if raceEnabled {
		b.Skip("times whole processes: run without -race")
	}
	root := b.TempDir()
	d := newDaemon(b)
	d.write("all.yaml", fmt.Sprintf(benchNetnsManifests, root))
	d.start("--egress-address", "127.0.0.1:0")
	d.waitReady("plain", "sandboxed", "offline")
	if out, err := exec.Command(filepath.Join(bin, "marshal-confine"), "check").CombinedOutput(); err != nil {
		b.Skipf("netns isolation is not available here: %s", out)
	}
	run := func(ws string) func() *exec.Cmd {
		return func() *exec.Cmd {
			cmd := exec.Command(filepath.Join(bin, "marshalctl"), "--socket", d.socket, "run", "-w", ws, "--", "/bin/true")
			cmd.Env = agentEnv()
			return cmd
		}
	}
	ways := []launcher{
		{"bare", func() *exec.Cmd { return exec.Command("/bin/true") }},
		{"cgroup", run("plain")},
		{"netns", run("sandboxed")},
		{"netns-none", run("offline")},
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		ways = append(ways, launcher{"bwrap", func() *exec.Cmd {
			return exec.Command(bwrap, "--ro-bind", "/", "/", "--unshare-net", "/bin/true")
		}})
	}
	times := timeLaunchers(b, ways, 0)
	medians := map[string]time.Duration{}
	for i, w := range ways {
		medians[w.name] = median(times[i])
		b.ReportMetric(ms(median(times[i])), w.name+"-median-ms")
		b.ReportMetric(ms(percentile(times[i], 90)), w.name+"-p90-ms")
	}
	b.ReportMetric(ms(medians["netns"]-medians["cgroup"]), "netns-over-cgroup-ms")
	b.ReportMetric(ms(medians["netns-none"]-medians["cgroup"]), "netns-none-over-cgroup-ms")
	if bw, ok := medians["bwrap"]; ok {
		b.ReportMetric(ms(bw-medians["bare"]), "bwrap-over-bare-ms")
	}
	b.ReportMetric(0, "ns/op")
	d.waitSettled(b)
}
