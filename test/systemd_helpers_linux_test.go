//go:build linux

package test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// srcRoot is the directory of go.mod and the Makefile, seen from the
// package directory the tests run in.
func srcRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatalf("no Makefile at the module root: %v", err)
	}
	return root
}

// makeVars are the variables of the install targets; makeEnv drops them
// from the environment, with make's own, so that only the command line
// sets them.
var makeVars = []string{
	"PREFIX", "DESTDIR", "BINDIR", "BIN", "STATE", "INSTALL",
	"SYSTEMD_SYSTEM_UNITDIR", "SYSTEMD_USER_UNITDIR",
	"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS",
}

func makeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(makeVars, k) {
			env = append(env, kv)
		}
	}
	return env
}

// runMake runs a target of the Makefile with vars (NAME=VALUE) and
// returns its combined output and error.
func runMake(t *testing.T, target string, vars ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("needs make")
	}
	args := append([]string{"-C", srcRoot(t), "--no-print-directory", target}, vars...)
	cmd := exec.Command("make", args...)
	cmd.Env = makeEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustMake runs a target and fails t unless it succeeds.
func mustMake(t *testing.T, target string, vars ...string) {
	t.Helper()
	if out, err := runMake(t, target, vars...); err != nil {
		t.Fatalf("make %s %s: %v\n%s", target, strings.Join(vars, " "), err, out)
	}
}

// unitDirective returns the values of every line of a unit file that sets
// key (in any section), in order.
func unitDirective(unit, key string) []string {
	var vals []string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

// userManager starts a throwaway systemd user manager for t, skipping t
// when the host cannot run one, and stops it when t ends. Then it also
// removes the manager's group from the cgroup v1 hierarchies, where
// marshald's probes may have created it below the manager's own group; the
// manager's Stop only removes the hierarchies it runs in.
func userManager(t *testing.T) *testutil.UserManager {
	t.Helper()
	testutil.RequireRoot(t)
	mounts, err := cgroup.ReadMounts()
	if err != nil {
		t.Fatal(err)
	}
	m, err := testutil.StartUserManager()
	if errors.Is(err, syscall.ECONNREFUSED) {
		// The manager binds its bus socket a moment before it listens on
		// it, and StartUserManager dials as soon as the file appears; a
		// few starts in a hundred lose that race. It is StartUserManager's
		// to fix (retry the dial until its deadline); until then, one more
		// manager.
		m, err = testutil.StartUserManager()
	}
	if errors.Is(err, testutil.ErrNoUserManager) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stopping the user manager: %v", err)
		}
		for _, mnt := range v1Mounts(mounts) {
			if err := removeEmptyGroups(filepath.Join(mnt, m.Cgroup)); err != nil {
				t.Errorf("removing the manager's v1 groups: %v", err)
			}
		}
	})
	return m
}

// v1Mounts lists each cgroup v1 mount point once, name=systemd excluded
// (the manager runs in it, and Stop removes its group there).
func v1Mounts(m cgroup.Mounts) []string {
	var out []string
	for ctrl, mnt := range m.V1 {
		if ctrl != "name=systemd" && !slices.Contains(out, mnt) {
			out = append(out, mnt)
		}
	}
	slices.Sort(out)
	return out
}

// removeEmptyGroups removes root and the groups below it, deepest first.
// They hold no process: only marshald's probe groups get there.
func removeEmptyGroups(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range slices.Backward(dirs) {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// systemctl runs `systemctl --user ARGS…` against m and returns its
// combined output and error.
func systemctl(m *testutil.UserManager, args ...string) (string, error) {
	cmd := exec.Command("systemctl", append([]string{"--user", "--no-pager"}, args...)...)
	cmd.Env = append(os.Environ(), m.Env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// mustSystemctl runs systemctl and fails t unless it exits 0.
func mustSystemctl(t *testing.T, m *testutil.UserManager, args ...string) string {
	t.Helper()
	out, err := systemctl(m, args...)
	if err != nil {
		t.Fatalf("systemctl --user %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// unitProps returns properties of unit (the manager itself when unit is
// empty), as `systemctl --user show` prints them.
func unitProps(t *testing.T, m *testutil.UserManager, unit string, props ...string) map[string]string {
	t.Helper()
	args := []string{"show"}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	if unit != "" {
		args = append(args, unit)
	}
	return parseKeyValues(mustSystemctl(t, m, args...))
}

// managerEnv returns the environment the manager gives its services.
func managerEnv(t *testing.T, m *testutil.UserManager) map[string]string {
	t.Helper()
	return parseKeyValues(mustSystemctl(t, m, "show-environment"))
}

func parseKeyValues(out string) map[string]string {
	kv := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// provideInaccessibleNodes creates, in the manager's mount namespace, the
// /run/systemd/inaccessible nodes that PID 1 makes at boot on a real host.
// A manager bind-mounts them over what ProtectKernelTunables=,
// ProtectKernelLogs= and ProtectHome=yes hide, and this version looks for
// them there even in user mode; without them such a unit fails with
// 226/NAMESPACE. The throwaway manager's /run/systemd is an empty tmpfs of
// its own namespace, so this changes nothing of the host's.
func provideInaccessibleNodes(t *testing.T, m *testutil.UserManager) {
	t.Helper()
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter to prepare the manager's /run/systemd")
	}
	const script = `set -e
d=/run/systemd/inaccessible
[ -d "$d" ] && exit 0
mkdir -m 0755 "$d"
mkdir -m 0000 "$d/dir"
: >"$d/reg"
chmod 0000 "$d/reg"
mkfifo -m 0000 "$d/fifo"
mknod -m 0000 "$d/chr" c 0 0
mknod -m 0000 "$d/blk" b 0 0
`
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(m.PID), "--mount", "--", "/bin/sh", "-c", script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("preparing /run/systemd/inaccessible in the manager's namespace: %v\n%s", err, out)
	}
}

// copyUnit copies src to dst with mode perm.
func copyUnit(t *testing.T, src, dst string, perm fs.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, perm); err != nil {
		t.Fatal(err)
	}
}

// fileOrEmpty returns the content of path, "" when it does not exist yet.
func fileOrEmpty(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return string(data)
}

// withoutEnv returns the environment without the variables named.
func withoutEnv(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			env = append(env, kv)
		}
	}
	return env
}

// checkProps compares unit properties with want.
func checkProps(t *testing.T, when string, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s: %s=%q, want %q", when, k, got[k], want[k])
		}
	}
}

// logRecord returns the attributes of the first text log record with
// message msg (values unquoted only when they need no quotes, as paths
// here do not).
func logRecord(log, msg string) map[string]string {
	for _, line := range strings.Split(log, "\n") {
		attrs := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				attrs[k] = v
			}
		}
		if attrs["msg"] == msg {
			return attrs
		}
	}
	return map[string]string{}
}

// cgroup2Path returns the cgroup2 path of process pid.
func cgroup2Path(t *testing.T, pid int) string {
	t.Helper()
	data := string(readBytes(t, fmt.Sprintf("/proc/%d/cgroup", pid)))
	for _, line := range strings.Split(data, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("no cgroup2 line for pid %d:\n%s", pid, data)
	return ""
}

// filesBelow lists the files (not directories) below root, relative to it with a
// leading slash, sorted.
func filesBelow(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, strings.TrimPrefix(path, root))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeText(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
