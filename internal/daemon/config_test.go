package daemon

import (
	"strings"
	"testing"
)

// The defaults follow the mode the euid implies, and the XDG directories
// in user mode; the socket is where marshalctl looks.
func TestDefaultConfig(t *testing.T) {
	tests := []struct {
		name                   string
		euid                   int
		env                    map[string]string
		mode, config, st, sock string
		wantErr                string
	}{
		{name: "root_is_system_mode", euid: 0, mode: ModeSystem,
			config: "/etc/marshal/manifests.d", st: "/var/lib/marshal", sock: "/run/marshal/marshal.sock"},
		{name: "user_with_xdg", euid: 1000, env: map[string]string{"XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/run/user/1000"},
			mode: ModeUser, config: "/c/marshal/manifests.d", st: "/s/marshal", sock: "/run/user/1000/marshal.sock"},
		{name: "user_with_home_only", euid: 1000, env: map[string]string{"HOME": "/home/dev"},
			mode: ModeUser, config: "/home/dev/.config/marshal/manifests.d", st: "/home/dev/.local/state/marshal", sock: ""},
		{name: "user_with_nothing", euid: 1000, wantErr: "pass --config-dir and --state-dir"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DefaultConfig(tc.euid, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DefaultConfig = %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Mode != tc.mode || c.ConfigDir != tc.config || c.StateDir != tc.st || c.Socket != tc.sock {
				t.Errorf("DefaultConfig = mode %q, config %q, state %q, socket %q; want %q, %q, %q, %q",
					c.Mode, c.ConfigDir, c.StateDir, c.Socket, tc.mode, tc.config, tc.st, tc.sock)
			}
			if tc.sock == "" && (c.Validate() == nil || !strings.Contains(c.Validate().Error(), "pass --socket")) {
				t.Errorf("Validate without a socket = %v, want it to say pass --socket", c.Validate())
			}
		})
	}
}

// Validate names every flag that is wrong, at once.
func TestValidate(t *testing.T) {
	c, err := DefaultConfig(0, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	c.Backend, c.LogFormat, c.Pressure, c.CgroupRoot = "docker", "xml", "maybe", "marshal"
	err = c.Validate()
	for _, want := range []string{`--backend "docker"`, `--log-format "xml"`, `--pressure "maybe"`, `--cgroup-root "marshal"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to name %s", err, want)
		}
	}
}
