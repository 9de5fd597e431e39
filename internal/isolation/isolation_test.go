package isolation

import (
	"errors"
	"os"
	"slices"
	"testing"
)

func TestCommandRunsTheAgentThroughTheHelper(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Launch
		want []string
	}{
		{"bridge", Launch{Helper: "/usr/bin/marshal-confine", Socket: "/run/marshal/egress.sock", Attempt: "00ff"},
			[]string{"/usr/bin/marshal-confine", "exec", "--socket", "/run/marshal/egress.sock", "--port", "3128", "--attempt", "00ff",
				"--argv0", "claude", "--", "/opt/bin/claude", "--resume"}},
		{"no_way_out", Launch{Helper: "/usr/bin/marshal-confine"},
			[]string{"/usr/bin/marshal-confine", "exec", "--argv0", "claude", "--", "/opt/bin/claude", "--resume"}},
		// Each rule carries its field path for a refusal to name; one
		// that cannot be carried is left out, and marshald's own have none.
		{"filesystem", Launch{Helper: "/usr/bin/marshal-confine", HostNetwork: true, ID: "7", Filesystem: &Filesystem{Default: "read", Rules: []FileRule{
			{Access: "write", Path: TmpPrefix, Origin: "default"},
			{Access: "none", Path: "/home/a/.ssh", Origin: "spec.filesystem.rules[1]"},
			{Access: "none", Path: "/home/a/x", Origin: "a:b"},
			{Access: "none", Path: "/etc/marshal"},
		}}},
			[]string{"/usr/bin/marshal-confine", "exec", "--network", "host", "--fs-default", "read", "--tmp", TmpDir("7"),
				"--fs", "write@default:" + TmpDir("7"), "--fs", "none@spec.filesystem.rules[1]:/home/a/.ssh",
				"--fs", "none:/home/a/x", "--fs", "none:/etc/marshal", "--argv0", "claude", "--", "/opt/bin/claude", "--resume"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, argv := tc.l.Command("/opt/bin/claude", []string{"claude", "--resume"})
			if path != tc.l.Helper || !slices.Equal(argv, tc.want) {
				t.Errorf("Command = %s %q, want %q", path, argv, tc.want)
			}
		})
	}
}

// Each setting that forbids the namespaces is named; root is not held to
// the settings that only bind unprivileged users.
func TestCheckNamesTheSettingThatForbids(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		uid      uint32
		want     string
	}{
		{"allowed", map[string]string{sysctlMaxUserNS: "63000", sysctlUnprivileged: "1"}, 1000, ""},
		{"no_user_ns", map[string]string{procUserNS: ""}, 1000, reasonNoUserNS},
		{"max_zero", map[string]string{sysctlMaxUserNS: "0"}, 0, reasonMaxUserNS},
		{"net_max_zero", map[string]string{sysctlMaxNetNS: "0\n"}, 1000, reasonMaxNetNS},
		{"debian_clone", map[string]string{sysctlUnprivileged: "0"}, 1000, reasonUnprivileged},
		{"debian_clone_root", map[string]string{sysctlUnprivileged: "0"}, 0, ""},
		{"apparmor", map[string]string{sysctlAppArmor: "1"}, 1000, reasonAppArmor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(path string) ([]byte, error) {
				if v, ok := tc.settings[path]; ok {
					if v == "" {
						return nil, os.ErrNotExist
					}
					return []byte(v), nil
				}
				if path == procUserNS || path == procNetNS {
					return nil, nil
				}
				return nil, os.ErrNotExist
			}
			err := check(tc.uid, read)
			var ue *UnavailableError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("check = %v, want nil", err)
			case tc.want != "" && (!errors.As(err, &ue) || ue.Reason != tc.want || !errors.Is(err, ErrUnavailable)):
				t.Errorf("check = %v, want %q", err, tc.want)
			}
		})
	}
}
