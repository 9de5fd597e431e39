package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// identify runs marshalctl identify with args; it needs no daemon.
func identify(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), append([]string{"identify"}, args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return result{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
}

// startSleep starts a child that lives until the test ends.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func TestIdentifyProcessInScope(t *testing.T) {
	c := testutil.NewCgroupTree(t)
	id := scope.NewID()
	name := scope.ScopeName("my-agent", id)
	dir := c.V2(scope.RootSlice, scope.SliceName("my-agent"), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pid := startSleep(t).Process.Pid
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}

	r := identify(t, strconv.Itoa(pid))
	want := fmt.Sprintf("profile my-agent, scope %s, id %s\n", name, id)
	if r.code != 0 || r.stdout != want {
		t.Errorf("identify %d = exit %d, %q %q; want 0, %q", pid, r.code, r.stdout, r.stderr, want)
	}

	r = identify(t, "-o", "json", strconv.Itoa(pid))
	var got identity.Identity
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("identify -o json = exit %d, %q: %v", r.code, r.stdout, err)
	}
	if got.Profile != "my-agent" || got.ID != id || got.Scope != name || got.PID != pid {
		t.Errorf("identify -o json = %+v", got)
	}
}

func TestIdentifyOutsideAScope(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pid  int
	}{
		{name: "given_pid", args: []string{strconv.Itoa(os.Getpid())}, pid: os.Getpid()},
		{name: "default_is_the_parent", pid: os.Getppid()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := identity.Resolve(tc.pid); err == nil {
				t.Skipf("process %d is in a marshal scope itself", tc.pid)
			}
			r := identify(t, tc.args...)
			want := fmt.Sprintf("marshalctl: process %d is not in a marshal scope (cgroup ", tc.pid)
			if r.code != ExitNo || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "marshalctl run") {
				t.Errorf("identify %v = exit %d, %q; want exit 1 and %q…", tc.args, r.code, r.stderr, want)
			}
		})
	}
}

func TestIdentifyMissingProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid // reaped: nothing has this pid until it is reused
	r := identify(t, strconv.Itoa(pid))
	if want := fmt.Sprintf("marshalctl: no process %d: it does not exist or has exited\n", pid); r.code != ExitFailure || r.stderr != want {
		t.Errorf("identify %d = exit %d, %q; want exit 3, %q", pid, r.code, r.stderr, want)
	}
}

func TestIdentifyUsage(t *testing.T) {
	for _, args := range [][]string{{"x"}, {"0"}, {"1", "2"}, {"-o", "yaml", "1"}} {
		if r := identify(t, args...); r.code != ExitUsage {
			t.Errorf("identify %v = exit %d, %q; want 2", args, r.code, r.stderr)
		}
	}
}
