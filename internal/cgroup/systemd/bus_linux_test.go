package systemd

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

func TestFindUserBus(t *testing.T) {
	tests := []struct {
		name     string
		address  string   // DBUS_SESSION_BUS_ADDRESS
		runtime  bool     // set XDG_RUNTIME_DIR to a fresh directory
		sockets  []string // sockets to create in it
		files    []string // plain files to create in it
		want     Bus      // with "$DIR" for the runtime directory
		wantErr  bool
		wantMsgs []string // in the error, with "$DIR"
	}{
		{
			name:    "session_address_first",
			address: "unix:path=/elsewhere/bus",
			runtime: true,
			sockets: []string{"systemd/private", "bus"},
			want:    Bus{Address: "unix:path=/elsewhere/bus"},
		},
		{
			name:    "private_socket_before_bus",
			runtime: true,
			sockets: []string{"systemd/private", "bus"},
			want:    Bus{Address: "unix:path=$DIR/systemd/private", Direct: true},
		},
		{
			name:    "bus_socket",
			runtime: true,
			sockets: []string{"bus"},
			want:    Bus{Address: "unix:path=$DIR/bus"},
		},
		{
			name:     "plain_files_are_not_sockets",
			runtime:  true,
			files:    []string{"systemd/private", "bus"},
			wantErr:  true,
			wantMsgs: []string{"$DIR/systemd/private", "$DIR/bus"},
		},
		{
			name:     "empty_runtime_dir",
			runtime:  true,
			wantErr:  true,
			wantMsgs: []string{"DBUS_SESSION_BUS_ADDRESS is unset", "$DIR/systemd/private", "$DIR/bus"},
		},
		{
			name:     "nothing_set",
			wantErr:  true,
			wantMsgs: []string{"DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := ""
			if tc.runtime {
				dir = t.TempDir()
			}
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", tc.address)
			t.Setenv("XDG_RUNTIME_DIR", dir)
			for _, s := range tc.sockets {
				listenUnix(t, filepath.Join(dir, s))
			}
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := FindBus(true)
			if tc.wantErr {
				if !errors.Is(err, ErrNoBus) || !errors.Is(err, cgroup.ErrUnavailable) {
					t.Fatalf("FindBus(true) = %+v, %v, want an error wrapping %v", got, err, ErrNoBus)
				}
				for _, m := range tc.wantMsgs {
					if m = strings.ReplaceAll(m, "$DIR", dir); !strings.Contains(err.Error(), m) {
						t.Errorf("FindBus(true) error %q does not name %q", err, m)
					}
				}
				return
			}
			want := tc.want
			want.Address = strings.ReplaceAll(want.Address, "$DIR", dir)
			if err != nil || got != want {
				t.Fatalf("FindBus(true) = %+v, %v, want %+v", got, err, want)
			}
		})
	}
}

// listenUnix makes a real unix socket at path, closed when t ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}
