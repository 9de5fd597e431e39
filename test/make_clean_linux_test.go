package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMakeClean removes the build output and the state of make run, but
// not while a marshald holds that state.
func TestMakeClean(t *testing.T) {
	dir := t.TempDir()
	binDir, stateDir := filepath.Join(dir, "bin"), filepath.Join(dir, "state")
	for _, p := range []string{filepath.Join(binDir, "marshald"), filepath.Join(stateDir, "state.db")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vars := []string{"BIN=" + binDir, "STATE=" + stateDir}

	// marshald holds its state file locked, as bbolt does.
	db, err := os.Open(filepath.Join(stateDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(db.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	out, err := runMake(t, "clean", vars...)
	if err == nil || !strings.Contains(out, "stop it first") {
		t.Errorf("make clean while marshald runs: %v\n%s\nwant a refusal", err, out)
	}
	if _, err := os.Stat(stateDir); err != nil {
		t.Errorf("make clean while marshald runs removed its state: %v", err)
	}
	db.Close()

	mustMake(t, "clean", vars...)
	for _, p := range []string{binDir, stateDir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after make clean: %v, want it gone", p, err)
		}
	}
}
