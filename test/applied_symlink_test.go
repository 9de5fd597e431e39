//go:build linux

package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apply never writes through an applied/ that is a symlink out of the
// config dir: it refuses, says why, and writes nothing there.
func TestApplyRefusesASymlinkOutOfTheConfigDir(t *testing.T) {
	d := newDaemon(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(d.config, "applied")); err != nil {
		t.Fatal(err)
	}
	d.start()
	manifest := filepath.Join(t.TempDir(), "newp.yaml")
	if err := os.WriteFile(manifest, []byte(profileYAML("newp", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := d.ctl("apply", "-f", manifest)
	if r.code == 0 || !strings.Contains(r.stderr, "applied/profile-newp.yaml resolves outside the config dir") {
		t.Fatalf("apply through a symlink out: exit %d\nstdout: %s\nstderr: %s\nwant a refusal that says why", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("apply wrote outside the config dir: %v", entries)
	}
}
