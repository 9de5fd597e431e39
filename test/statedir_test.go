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

// A start that fails before marshald is ready (here: no systemd manager
// for --backend systemd) writes nothing to the state dir and does not make
// it look used: after two failed starts, a good one starts, with no
// --init-journal.
func TestFailedStartsDoNotBlockTheNextStart(t *testing.T) {
	d := newDaemon(t)
	noBus := t.TempDir()
	for i := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "marshald"), "--config-dir", d.config, "--state-dir", d.state,
			"--socket", d.socket, "--backend", "systemd", "--egress-address", "off", "--pressure", "off")
		cmd.Env = append(os.Environ(),
			"DBUS_SYSTEM_BUS_ADDRESS=unix:path="+filepath.Join(noBus, "system"),
			"DBUS_SESSION_BUS_ADDRESS=unix:path="+filepath.Join(noBus, "session"),
			"XDG_RUNTIME_DIR="+noBus)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "cgroup backend") {
			t.Fatalf("start %d with no systemd manager = %v:\n%s\nwant a failure naming the cgroup backend", i+1, err, out)
		}
		if _, err := os.Stat(d.state); !os.IsNotExist(err) {
			t.Errorf("start %d, which failed for want of a cgroup backend, made the state dir: %v", i+1, err)
		}
	}
	d.start()
	if strings.Contains(d.log.String(), "--init-journal") {
		t.Errorf("the good start after two failed ones asked for --init-journal:\n%s", d.log.String())
	}
}
