//go:build linux && cgo

package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// What a netns launch and a confined launch add to an exec, beside
// bubblewrap doing the same, measured in one run, interleaved, as medians
// (p50) and 90th percentiles of the whole process in milliseconds:
// compare within a run, not across runs. The confined launches have the
// default rules of a profile that declares filesystem: {}, on a home
// where every default credential store exists, so that each is hidden by
// a mount; confine_default_rules_absent's home lacks two of them, whose
// paths are kept out of the default read. helper_exec_only is the floor of any launch helper: the
// helper exec'd with nothing to do, one more exec than bare; each
// *-over-bare-ms metric is what a way adds to bare at the median.
// MARSHAL_CONFINE_BENCH_BASE names another build of the helper, an
// earlier one, to time its confined launch beside this one's. Run as
// root, confine_default_rules_user is an ordinary user's confined launch
// (uid 65534, a home of its own), whose namespaces differ from root's
// (see mounts.c), and confine_default_rules_user_base the earlier
// build's.
func BenchmarkExec(b *testing.B) {
	f := setup(b)
	socket := "/nonexistent/proxy.sock" // the bridge never dials when nothing connects
	home, ws := benchHome(b, b.TempDir())
	tmp := filepath.Join(b.TempDir(), "tmp")
	services := benchServices(b)
	confine := func(network string) []string {
		return append([]string{f.helper, "exec", "--network", network}, defaultRules(home, ws, tmp)...)
	}
	cases := []benchCase{
		{name: "bare", argv: []string{"/bin/true"}},
		{name: "helper_exec_only", argv: []string{f.helper, "exec", "--network", "host", "--", "/bin/true"}},
		{name: "netns", argv: []string{f.helper, "exec", "--", "/bin/true"}},
		{name: "netns_bridge", argv: []string{f.helper, "exec", "--socket", socket, "--", "/bin/true"}},
		{name: "netns_bridge_hidden", argv: []string{f.helper, "exec", "--socket", socket, "--hide", services.bus, "--hide", services.manager, "--", "/bin/true"}},
		{name: "confine_default_rules", argv: append(confine("host"), "--", "/bin/true")},
		{name: "confine_default_rules_netns", argv: append(confine("none"), "--", "/bin/true")},
	}
	// A home without two of the credential stores, as most have: the
	// default read is kept from where they would be made (absent.c).
	sparse, sparseWS := benchHome(b, b.TempDir())
	for _, absent := range []string{".azure", ".config/gcloud"} {
		if err := os.RemoveAll(filepath.Join(sparse, absent)); err != nil {
			b.Fatal(err)
		}
	}
	cases = append(cases, benchCase{name: "confine_default_rules_absent",
		argv: append(append([]string{f.helper, "exec", "--network", "host"}, defaultRules(sparse, sparseWS, tmp)...), "--", "/bin/true")})
	if base := os.Getenv("MARSHAL_CONFINE_BENCH_BASE"); base != "" {
		argv := append([]string{base, "exec", "--network", "host"}, defaultRules(home, ws, tmp)...)
		cases = append(cases, benchCase{name: "confine_default_rules_base", argv: append(argv, "--", "/bin/true")})
	}
	var userTmp string
	if os.Geteuid() == 0 {
		user := &syscall.Credential{Uid: 65534, Gid: 65534}
		home, ws := benchHome(b, userDir(b, user))
		userTmp = filepath.Join(home, "tmp")
		for name, helper := range map[string]string{"confine_default_rules_user": f.helper, "confine_default_rules_user_base": os.Getenv("MARSHAL_CONFINE_BENCH_BASE")} {
			if helper != "" {
				argv := append([]string{helper, "exec", "--network", "host"}, defaultRules(home, ws, userTmp)...)
				cases = append(cases, benchCase{name: name, argv: append(argv, "--", "/bin/true"), cred: user})
			}
		}
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		cases = append(cases, []benchCase{
			{name: "bwrap_unshare_net", argv: []string{bwrap, "--ro-bind", "/", "/", "--unshare-net", "/bin/true"}},
			{name: "bwrap_ro_ws_ssh", argv: []string{bwrap, "--ro-bind", "/", "/", "--bind", ws, ws, "--tmpfs", filepath.Join(home, ".ssh"), "/bin/true"}},
		}...)
	}
	if out, err := exec.Command(f.helper, "check", "--fs").CombinedOutput(); err != nil {
		b.Logf("filesystem confinement is not available here, its cases fail: %s", out)
	}
	times := make([][]time.Duration, len(cases))
	for b.Loop() {
		for i, tc := range cases {
			// Each launch makes {tmp}; marshald removes it later.
			os.Remove(tmp)
			if userTmp != "" {
				os.Remove(userTmp)
			}
			cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tc.cred}
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", tc.argv, err, out)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	medians := map[string]time.Duration{}
	for i, tc := range cases {
		medians[tc.name] = percentile(times[i], 50)
		b.ReportMetric(ms(medians[tc.name]), tc.name+"-p50-ms")
		b.ReportMetric(ms(percentile(times[i], 90)), tc.name+"-p90-ms")
	}
	for _, name := range []string{"helper_exec_only", "confine_default_rules", "confine_default_rules_absent", "confine_default_rules_base", "confine_default_rules_user", "confine_default_rules_user_base", "bwrap_ro_ws_ssh"} {
		if m, ok := medians[name]; ok {
			b.ReportMetric(ms(m-medians["bare"]), name+"-over-bare-ms")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// benchServices makes what a netns launch hides of a host with a user
// session: a bus socket (a file here) and a service manager's directory.
func benchServices(b *testing.B) (s struct{ bus, manager string }) {
	run := b.TempDir()
	s.bus, s.manager = filepath.Join(run, "bus"), filepath.Join(run, "systemd")
	if err := os.WriteFile(s.bus, nil, 0o666); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(s.manager, 0o755); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchCase is one way to launch /bin/true, as cred when it is not nil.
type benchCase struct {
	name string
	argv []string
	cred *syscall.Credential
}

// userDir is a fresh directory that user owns, below one it may pass
// through, removed when b ends.
func userDir(b *testing.B, user *syscall.Credential) string {
	parent, err := os.MkdirTemp("", "mbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(parent) })
	dir := filepath.Join(parent, "home")
	if err := os.Chmod(parent, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Chown(dir, int(user.Uid), int(user.Gid)); err != nil {
		b.Fatal(err)
	}
	return dir
}

// percentile returns the p-th percentile of d, which it sorts.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchHome makes home a home with every default credential store and a
// workspace, a git repository, in it, all of home's owner.
func benchHome(b *testing.B, home string) (string, string) {
	ws := filepath.Join(home, "src", "app")
	for _, d := range []string{".ssh", ".aws", ".gnupg", ".config/gh", ".docker", ".kube", ".config/gcloud", ".azure", ".cache",
		"src/app/.git/hooks"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{".netrc", ".git-credentials", "src/app/.git/config"} {
		if err := os.WriteFile(filepath.Join(home, f), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var owner syscall.Stat_t
	if err := syscall.Stat(home, &owner); err != nil {
		b.Fatal(err)
	}
	err := filepath.WalkDir(home, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(owner.Uid), int(owner.Gid))
	})
	if err != nil {
		b.Fatal(err)
	}
	return home, ws
}

// defaultRules are the helper's flags for the default rules, expanded as
// marshald expands them.
func defaultRules(home, ws, tmp string) []string {
	args := []string{"--fs-default", "read", "--tmp", tmp}
	for _, r := range (&v1alpha1.FilesystemSpec{}).Effective() {
		args = append(args, "--fs", string(r.Access)+"@"+r.Origin+":"+r.Path.Expand(home, ws, tmp))
	}
	// marshald's own paths, as in system mode.
	return append(args, "--fs", "none:/run/marshal", "--fs", "none:/etc/marshal", "--fs", "none:/var/lib/marshal")
}
