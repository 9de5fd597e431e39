package loader

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Realistic manifests of 30 to 45 lines with comments, one per kind.

func benchProfile(i int) string {
	return fmt.Sprintf(`# Profile for agent class %[1]d.
# Every launch of this class runs in its own scope inside the profile's
# slice, which carries the limits below.
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata:
  name: agent-%[1]d
  labels:
    team: platform
    tier: dev
    app.kubernetes.io/name: agent-%[1]d
    app.kubernetes.io/part-of: marshal
spec:
  # cgroup identifies and limits the process tree; netns will also
  # enforce the network policy.
  isolation: cgroup
  # Limits are shared by every agent of the profile.
  limits:
    # Two full cores.
    cpu_milli: 2000
    # 4 GiB.
    memory_bytes: 4294967296
    # Processes and threads.
    tasks: 1024
  # Keep live agents running when this profile is deleted.
  orphans: keep
# End of profile agent-%[1]d.
# Reviewed by the platform team.
# Changes go through the usual review.
`, i)
}

func benchWorkspace(i int) string {
	return fmt.Sprintf(`# Workspace %[1]d: a checkout where agents of the coder profile run.
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata:
  name: ws-%[1]d
  labels:
    team: frontend
    tier: dev
spec:
  # Absolute; Ready only while it is an existing directory.
  root: /home/dev/src/ws-%[1]d
  profile: agent-%[1]d
  network:
    policy: open   # part of the execution meaning
  exec:
    allow: true
    # Only these commands may start an execution.
    argv0:
      - claude
      - git
      - npm
    env:
      NODE_ENV: development
      CI: "1"
  processes:
    max_live: 8    # live-process slots
  resources:
    participation: required
    # What each execution reserves.
    request:
      cpu_milli: 250
      memory_bytes: 268435456
      tasks: 32
      minimum:
        cpu: accounted
        memory: kernel
        pids: accounted
`, i)
}

const benchHost = `# The host: what the admission authority may reserve here.
apiVersion: marshal.dev/v1alpha1
kind: Host
metadata:
  name: local
  labels:
    site: lab
spec:
  # Omitted fields are measured from the machine.
  capacity:
    # 1.6 cores of the 2 this machine has.
    cpu_milli: 1600
    # 8 GiB.
    memory_bytes: 8589934592
    # Processes and threads.
    tasks: 4096
  # How long an admitted execution may wait to be launched.
  prepared_ttl: 5s
# Nothing else is declared for the host.
# The authority scales the capacity by pressure.
# Full, half or zero.
# See the design notes.
# Reviewed by the platform team.
# Changes go through the usual review.
# Keep this file short.
# It is the only Host.
# Another Host would be refused.
# Line 26.
# Line 27.
# Line 28.
# Line 29.
# Line 30.
`

// writeBenchTree writes n manifest files, one object each: one Host, then
// Profiles and Workspaces alternating, in a few subdirectories.
func writeBenchTree(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	for i := range 10 {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("team-%d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		var content string
		switch {
		case i == 0:
			content = benchHost
		case i%2 == 0:
			content = benchProfile(i)
		default:
			content = benchWorkspace(i)
		}
		path := filepath.Join(dir, fmt.Sprintf("team-%d", i%10), fmt.Sprintf("m-%05d.yaml", i))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkLoadDir loads 10,000 manifest files from a warm cache: read,
// parse, decode, validate, default and merge.
func BenchmarkLoadDir(b *testing.B) {
	const files = 10_000
	dir := writeBenchTree(b, files)
	// Warm the page cache and check the tree loads cleanly.
	r, err := LoadDir(b.Context(), dir)
	if err != nil || len(r.Errors) > 0 || len(r.Objects) != files {
		b.Fatalf("LoadDir = %d objects, %d errors (%v), want %d objects", len(r.Objects), len(r.Errors), err, files)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadDir(b.Context(), dir); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(files*b.N)/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkDecode compares, for one Workspace manifest, this package's
// node decoder with sigs.k8s.io/yaml's strict decoder, both followed by
// Validate and Default. The latter gives no line numbers; the node parse
// alone is shown for scale.
func BenchmarkDecode(b *testing.B) {
	doc := []byte(benchWorkspace(1))
	b.Run("loader", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if f := LoadBytes("ws.yaml", doc); len(f.Errors) > 0 {
				b.Fatal(f.Errors)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
	})
	b.Run("sigs_yaml_strict", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			var w v1alpha1.Workspace
			if err := sigsyaml.UnmarshalStrict(doc, &w); err != nil {
				b.Fatal(err)
			}
			if errs := w.Validate(); len(errs) > 0 {
				b.Fatal(errs)
			}
			w.Default()
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
	})
	b.Run("yaml_node_parse_only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			dec := yaml.NewDecoder(bytes.NewReader(doc))
			for {
				var n yaml.Node
				if err := dec.Decode(&n); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
	})
}
