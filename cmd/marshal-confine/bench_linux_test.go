//go:build linux && cgo

package main

import (
	"os/exec"
	"testing"
)

// What a netns launch adds to an exec, beside bubblewrap doing the same
// (a new user and network namespace; bwrap needs a root, the host's, read
// only), measured in one run: compare the ratios, not across runs.
func BenchmarkExec(b *testing.B) {
	f := setup(b)
	socket := "/nonexistent/proxy.sock" // the bridge never dials when nothing connects
	cases := []struct {
		name string
		argv []string
	}{
		{"bare", []string{"/bin/true"}},
		{"netns", []string{f.helper, "exec", "--", "/bin/true"}},
		{"netns_bridge", []string{f.helper, "exec", "--socket", socket, "--", "/bin/true"}},
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		cases = append(cases, struct {
			name string
			argv []string
		}{"bwrap_unshare_net", []string{bwrap, "--ro-bind", "/", "/", "--unshare-net", "/bin/true"}})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if out, err := exec.Command(tc.argv[0], tc.argv[1:]...).CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%s", tc.argv, err, out)
				}
			}
		})
	}
}
