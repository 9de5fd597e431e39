package detect

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/cgroup/systemd"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// manager is a throwaway systemd user manager for the cases that need
// one; managerErr says why there is none.
var (
	manager    *testutil.UserManager
	managerErr error
)

func TestMain(m *testing.M) {
	um, err := testutil.StartUserManager()
	if err != nil && !errors.Is(err, testutil.ErrNoUserManager) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	manager, managerErr = um, err
	code := m.Run()
	if um != nil {
		if err := um.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the user manager: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is how a case sets up the process environment.
type env int

const (
	noBus      env = iota // no bus address, an empty runtime directory
	managerEnv            // the throwaway manager's environment
)

// setEnv points the user-manager lookup of t at nothing, or at the
// throwaway manager, and returns the runtime directory it set.
func setEnv(t *testing.T, e env) string {
	t.Helper()
	if e == managerEnv {
		if manager == nil {
			t.Skip(managerErr)
		}
		manager.Setenv(t)
		return manager.RuntimeDir
	}
	dir := t.TempDir()
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", dir)
	return dir
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name       string
		backend    string
		env        env
		fakeMount  bool   // a cgroup2 "mount" that is a plain directory
		want       string // backend name; "" for an error
		wantErr    error
		wantInErrs []string // "$RUNTIME" and "$MOUNT" stand for the paths
	}{
		{name: "auto_without_bus_picks_cgroupfs", backend: Auto, env: noBus, want: Cgroupfs},
		{name: "empty_means_auto", backend: "", env: noBus, want: Cgroupfs},
		{name: "auto_with_manager_picks_systemd", backend: Auto, env: managerEnv, want: Systemd},
		{
			name: "auto_with_neither_names_what_is_missing", backend: Auto, env: noBus, fakeMount: true,
			wantErr:    cgroup.ErrUnavailable,
			wantInErrs: []string{"$RUNTIME/systemd/private", "$RUNTIME/bus", "$MOUNT is not a cgroup2 mount"},
		},
		{name: "systemd_named", backend: Systemd, env: managerEnv, want: Systemd},
		{name: "systemd_named_without_bus_does_not_fall_back", backend: Systemd, env: noBus, wantErr: systemd.ErrNoBus},
		{name: "cgroupfs_named_beside_a_manager", backend: Cgroupfs, env: managerEnv, want: Cgroupfs},
		{name: "unknown_backend", backend: "docker", env: noBus, wantErr: ErrUnknownBackend},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runtime := setEnv(t, tc.env)
			opts := Options{Backend: tc.backend, User: true}
			if tc.want == Cgroupfs {
				// The tree goes into a private group, which must be
				// writable for cgroupfs to be picked.
				opts.CgroupRoot = testutil.NewCgroupTree(t).Rel
			}
			mount := ""
			if tc.fakeMount {
				mount = t.TempDir()
				opts.Mounts = cgroup.Mounts{V2: mount}
			}

			b, err := Open(t.Context(), opts)
			if err == nil {
				defer func() {
					if err := Close(b); err != nil {
						t.Errorf("Close() = %v", err)
					}
				}()
			}
			if tc.want != "" {
				if err != nil {
					t.Fatalf("Open(%+v) = %v", opts, err)
				}
				if b.Name() != tc.want {
					t.Fatalf("Open(%+v) picked %s, want %s", opts, b.Name(), tc.want)
				}
				// It works: it lists (none of) its scopes.
				if _, err := b.ListScopes(t.Context()); err != nil {
					t.Errorf("%s ListScopes() = %v", b.Name(), err)
				}
				return
			}
			t.Logf("Open() = %v", err)
			if b != nil || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Open(%+v) = %v, %v, want an error wrapping %v", opts, b, err, tc.wantErr)
			}
			if tc.wantErr == cgroup.ErrUnavailable {
				// It leads with what to do, for the user it runs as.
				var nb *NoBackendError
				want := "start your systemd user manager"
				if !systemdBooted() {
					want = "PID 1 is not systemd"
				}
				if !errors.As(err, &nb) || !strings.HasPrefix(err.Error(), "no cgroup backend works here: "+want) {
					t.Errorf("Open() error %q does not begin with what to do (%q)", err, want)
				}
			}
			for _, s := range tc.wantInErrs {
				s = strings.NewReplacer("$RUNTIME", runtime, "$MOUNT", filepath.Clean(mount)).Replace(s)
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open() error %q does not name %q", err, s)
				}
			}
		})
	}
}
