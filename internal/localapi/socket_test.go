package localapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDefaultSocket(t *testing.T) {
	tests := []struct {
		name    string
		euid    int
		runtime string
		want    string
		wantErr error
	}{
		{name: "root_is_system_mode", euid: 0, runtime: "/run/user/0", want: SystemSocket},
		{name: "user_mode", euid: 1000, runtime: "/run/user/1000", want: "/run/user/1000/marshal.sock"},
		{name: "user_without_runtime_dir", euid: 1000, wantErr: ErrNoRuntimeDir},
		{name: "user_with_relative_runtime_dir", euid: 1000, runtime: "run/user", wantErr: ErrNoRuntimeDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "XDG_RUNTIME_DIR" {
					return tc.runtime
				}
				return ""
			}
			got, err := DefaultSocketFor(tc.euid, getenv)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("DefaultSocketFor(%d, XDG_RUNTIME_DIR=%q) = %q, %v, want %q, %v", tc.euid, tc.runtime, got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--socket") {
				t.Errorf("error %q does not say what to do", err)
			}
		})
	}
}

func TestResolveSocket(t *testing.T) {
	tests := []struct {
		name string
		flag string
		env  string
		want string
	}{
		{name: "flag_first", flag: "/a.sock", env: "/b.sock", want: "/a.sock"},
		{name: "then_env", env: "/b.sock", want: "/b.sock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SocketEnv, tc.env)
			if got, err := ResolveSocket(tc.flag); got != tc.want || err != nil {
				t.Errorf("ResolveSocket(%q) with %s=%q = %q, %v, want %q", tc.flag, SocketEnv, tc.env, got, err, tc.want)
			}
		})
	}
	t.Run("then_default", func(t *testing.T) {
		t.Setenv(SocketEnv, "")
		// Without XDG_RUNTIME_DIR (a user outside a login session), both
		// fail alike: two errors, equal in what they say.
		want, wantErr := DefaultSocket()
		if got, err := ResolveSocket(""); got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("ResolveSocket(\"\") = %q, %v, want DefaultSocket's %q, %v", got, err, want, wantErr)
		}
	})
}
