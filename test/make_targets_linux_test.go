//go:build linux

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeLintNeedsNothingInstalled runs make lint as on a fresh machine:
// an empty GOPATH and no staticcheck on PATH. The README's test command
// must need nothing beyond Go: the pinned staticcheck is a tool of
// tools/lint, built from the module cache.
func TestMakeLintNeedsNothingInstalled(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}
	modcache, err := exec.Command(goCmd, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	gopath := t.TempDir()
	env := []string{
		"PATH=" + filepath.Dir(goCmd) + ":/usr/bin:/bin",
		"GOPATH=" + gopath,
		// The modules a fresh machine would download: lint must not
		// depend on anything a previous make tools left in GOPATH.
		"GOMODCACHE=" + strings.TrimSpace(string(modcache)),
	}
	for _, kv := range makeEnv() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "GOPATH", "GOMODCACHE", "GOBIN":
		default:
			env = append(env, kv)
		}
	}
	cmd := exec.Command("make", "-C", srcRoot(t), "--no-print-directory", "lint", "PKGS=./internal/version")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make lint with an empty GOPATH: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "staticcheck ./internal/version") {
		t.Errorf("make lint did not run staticcheck:\n%s", out)
	}
	if entries, _ := os.ReadDir(filepath.Join(gopath, "bin")); len(entries) > 0 {
		t.Errorf("make lint installed into GOPATH/bin: %v", entries)
	}
}

// TestMakeRunTakesFlags: MARSHALD_FLAGS reaches marshald's command line,
// so that make run can sit beside an installed marshald.
func TestMakeRunTakesFlags(t *testing.T) {
	out, err := runMake(t, "run", "-n", "MARSHALD_FLAGS=--egress-address 127.0.0.1:4751")
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "marshald --config-dir manifests --state-dir .marshal --egress-address 127.0.0.1:4751") {
		t.Errorf("make -n run does not pass MARSHALD_FLAGS to marshald:\n%s", out)
	}
}
