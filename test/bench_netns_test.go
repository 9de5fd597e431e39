//go:build linux

package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// benchNetnsManifests are three profiles alike but for their isolation
// and filesystem confinement (the default rules), all with egress, and a
// workspace of each.
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
kind: Profile
metadata: {name: confined}
spec:
  filesystem: {}
  egress: {default: allow}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: confined}
spec: {root: %[1]s, profile: confined, processes: {max_live: 64}}
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
// it (a bridge to the proxy), with network policy none (a namespace, no
// bridge), and with filesystem confinement's default rules (confined),
// against bare /bin/true, `bwrap --unshare-net` (the host's root
// read-only, as bwrap needs one) and `bwrap --ro-bind / / --bind WS WS
// --tmpfs ~/.ssh` measured in the same run, interleaved. It reports
// medians and 90th percentiles in milliseconds, what netns isolation and
// confinement add to the same launch (the targets: at most 1.5 ms, and
// 0.5 ms) and what each bwrap adds to the bare exec.
func BenchmarkRunNetns(b *testing.B) {
	if raceEnabled {
		b.Skip("times whole processes: run without -race")
	}
	root := b.TempDir()
	d := newDaemon(b)
	d.write("all.yaml", fmt.Sprintf(benchNetnsManifests, root))
	d.start("--egress-address", "127.0.0.1:0")
	d.waitReady("plain", "sandboxed", "offline", "confined")
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
		{"confined", run("confined")},
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		ssh := filepath.Join(b.TempDir(), ".ssh")
		if err := os.Mkdir(ssh, 0o700); err != nil {
			b.Fatal(err)
		}
		ways = append(ways, launcher{"bwrap", func() *exec.Cmd {
			return exec.Command(bwrap, "--ro-bind", "/", "/", "--unshare-net", "/bin/true")
		}}, launcher{"bwrap-ws-ssh", func() *exec.Cmd {
			return exec.Command(bwrap, "--ro-bind", "/", "/", "--bind", root, root, "--tmpfs", ssh, "/bin/true")
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
	b.ReportMetric(ms(medians["confined"]-medians["cgroup"]), "confined-over-cgroup-ms")
	for _, bw := range []string{"bwrap", "bwrap-ws-ssh"} {
		if m, ok := medians[bw]; ok {
			b.ReportMetric(ms(m-medians["bare"]), bw+"-over-bare-ms")
		}
	}
	b.ReportMetric(0, "ns/op")
	d.waitSettled(b)
}
