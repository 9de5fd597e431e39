//go:build linux && cgo

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// lockedSecret makes dir/locked/secret, locked (mode) and owned by uid,
// in dir, made with dirMode and owned by dirUID, and returns the
// secret's path and the locked directory's.
func lockedSecret(t *testing.T, x fsFixture, dirMode os.FileMode, dirUID int, mode os.FileMode, uid int) (secret, locked string) {
	t.Helper()
	dir, err := os.MkdirTemp(x.base, "locked")
	if err != nil {
		t.Fatal(err)
	}
	locked = filepath.Join(dir, "locked")
	secret = filepath.Join(locked, "secret")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		uid  int
		mode os.FileMode
	}{{locked, uid, mode}, {dir, dirUID, dirMode}} {
		if err := os.Chown(c.path, c.uid, -1); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(c.path, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	// Whoever the test runs as removes it again.
	t.Cleanup(func() { os.Chmod(locked, 0o700); os.Chmod(dir, 0o700) })
	return secret, locked
}

// A none rule whose path the launching user cannot reach, because a
// directory on the way is closed to it, is refused when the agent could
// open that directory again (it owns it and may chmod it, or may move it
// aside for its own), naming the rule and the directory, and the agent
// never runs. Run as an ordinary user: root is not kept out by a mode.
func TestUnreachableRuleTheAgentCouldReachRefuses(t *testing.T) {
	f := fsSetup(t)
	var cred *unix.Ucred
	uid := os.Geteuid()
	if uid == 0 {
		cred = &unix.Ucred{Uid: 65534, Gid: 65534}
		uid = 65534
	}
	cases := []struct {
		name             string
		dirMode, mode    os.FileMode
		dirUID, ownerUID int
		viaLink          bool   // the rule names it through a symlink
		origin           string // the rule's field path, as marshald gives it
	}{
		// Its own directory, mode 0000: the agent chmods it back.
		{"own_directory", 0o755, 0o000, uid, uid, false, "spec.filesystem.rules[3]"},
		// Root's directory in one the user owns: moved aside.
		{"in_own_directory", 0o755, 0o700, uid, 0, false, ""},
		// The same, named through a relative symlink to the directory.
		{"through_symlink", 0o755, 0o000, uid, uid, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.ownerUID == 0 && os.Geteuid() != 0 {
				t.Skip("needs root to make a directory of root's")
			}
			x := newFSFixture(t, f)
			secret, locked := lockedSecret(t, x, c.dirMode, c.dirUID, c.mode, c.ownerUID)
			if c.viaLink {
				link := filepath.Join(x.base, "link")
				rel, _ := filepath.Rel(x.base, locked)
				if err := os.Symlink(rel, link); err != nil {
					t.Fatal(err)
				}
				secret = filepath.Join(link, "secret")
			}
			flag, rule := "none:"+secret, "the rule none:"+secret
			if c.origin != "" {
				flag, rule = "none@"+c.origin+":"+secret, c.origin+" (none:"+secret+")"
			}
			_, err := runFSAgentProbe(t, f, x, probe{Secret: secret}, cred, nil,
				append([]string{"--network", "host", "--attempt", "00ff"}, append(x.rules(), "--fs", flag)...)...)
			var ee *exec.ExitError
			if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 78 {
				t.Fatalf("err = %v, want exit status 78: the hidden path would be the agent's to open", err)
			}
			for _, want := range []string{"ISOLATION_UNSUPPORTED: filesystem confinement unavailable: " + rule + " cannot be given: " + locked + ", which", "nothing was started"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q, want it to say %q", err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(x.ws, "new-file")); err == nil {
				t.Errorf("the agent ran")
			}
		})
	}
}

// A none rule whose path is out of the launching user's reach behind a
// directory of another user that it can neither change nor move aside
// is skipped: the kernel keeps the agent out, and the launch proceeds.
func TestUnreachableRuleTheKernelKeepsOutProceeds(t *testing.T) {
	f := fsSetup(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a directory of root's")
	}
	x := newFSFixture(t, f)
	secret, _ := lockedSecret(t, x, 0o755, 0, 0o700, 0)
	res, err := runFSAgentProbe(t, f, x, probe{Secret: secret}, &unix.Ucred{Uid: 65534, Gid: 65534}, nil,
		append([]string{"--network", "host"}, append(x.rules(), "--fs", "none:"+secret)...)...)
	if err != nil {
		t.Fatalf("launch refused: %v", err)
	}
	if res["write_workspace_root"] != "" {
		t.Errorf("write_workspace_root: %s, want the launch confined as declared", res["write_workspace_root"])
	}
	if !strings.Contains(res["read_secret"], "permission denied") {
		t.Errorf("read_secret: %q, want permission denied", res["read_secret"])
	}
}
