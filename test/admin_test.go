//go:build linux

package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/admission"
)

// `marshalctl admin backup` writes a consistent copy of the journal while
// marshald runs: a journal the authority opens as its own.
func TestAdminBackup(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy, launchWorkspace{name: "web", participation: "required"}), "web")
	if r := d.runNow("-w", "web", "--", "true"); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	backup := filepath.Join(t.TempDir(), "journal.db")
	out := d.mustCtl("admin", "backup", backup)
	if !strings.Contains(out, "wrote "+backup) {
		t.Errorf("admin backup printed %q", out)
	}
	a, err := admission.Open(backup, admission.Options{})
	if err != nil {
		t.Fatalf("the backup does not open as a journal: %v", err)
	}
	a.Close()
	if r := d.ctl("admin", "backup", backup); r.code == 0 {
		t.Error("a second backup overwrote the first")
	}
	entries, _ := os.ReadDir(d.state)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".backup-") {
			t.Errorf("the daemon left %s in its state dir", e.Name())
		}
	}
}
