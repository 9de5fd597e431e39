//go:build linux

package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// A state dir marshald is given open to others is made private; a shared
// one is refused.
func TestStateDirIsMadePrivateOrRefused(t *testing.T) {
	t.Run("open_to_others", func(t *testing.T) {
		d := newDaemon(t)
		if err := os.MkdirAll(d.state, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d.state, 0o755) // whatever the umask left
		d.start()
		st, err := os.Stat(d.state)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Fatalf("state dir mode = %04o, want 0700", st.Mode().Perm())
		}
		if !strings.Contains(d.log.String(), "made the state dir private") {
			t.Errorf("marshald did not say it changed the state dir's mode:\n%s", d.log.String())
		}
	})
	t.Run("shared", func(t *testing.T) {
		d := newDaemon(t)
		if err := os.MkdirAll(d.state, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.state, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "marshald"), "--config-dir", d.config, "--state-dir", d.state,
			"--socket", d.socket, "--backend", "cgroupfs", "--cgroup-root", d.root)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "is shared (mode 1777, sticky)") {
			t.Fatalf("marshald on a shared state dir = %v:\n%s\nwant a refusal that says why", err, out)
		}
		if st, err := os.Stat(d.state); err != nil || st.Mode()&(os.ModePerm|os.ModeSticky) != 0o777|os.ModeSticky {
			t.Fatalf("marshald changed a shared state dir: %v %v", st.Mode(), err)
		}
	})
}
