package apiserver_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

const (
	nobody  = 65534
	nogroup = 65534
	// otherGroup is a group nobody is not in unless the test adds it.
	otherGroup = 54321
)

// getAs runs the test binary as uid/gid with supplementary groups, to GET
// path on socket, and returns what it printed: "STATUS BODY" or
// "error …".
func getAs(t *testing.T, socket, path string, uid, gid uint32, groups ...uint32) string {
	t.Helper()
	cmd := exec.Command(sharedBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), getEnv+"="+socket, pathEnv+"="+path, "GORACE=atexit_sleep_ms=0")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client as uid %d: %v (%s)", uid, err, out)
	}
	return string(out)
}

// socketDir returns a fresh directory that every user may pass through.
func socketDir(t *testing.T) string {
	t.Helper()
	dir := testutil.ShortDir(t)
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPeerCheck(t *testing.T) {
	testutil.RequireRoot(t)
	gid := func(g uint32) *uint32 { return &g }
	tests := []struct {
		name   string
		listen func(path string) (net.Listener, error)
		// socketMode, when set, loosens the socket so the kernel lets the
		// caller connect and the server's own check is what answers.
		socketMode os.FileMode
		allowGID   *uint32
		groups     []uint32
		path       string
		want       string // prefix of what the client printed
	}{
		{
			name:       "other_uid_refused",
			listen:     apiserver.Listen,
			socketMode: 0o666,
			path:       "/v1/info",
			want:       `403 {"code":"FORBIDDEN","message":"uid 65534 may not use this marshald: it serves root; run marshalctl as one of them"}`,
		},
		{
			name:       "other_uid_refused_on_added_routes",
			listen:     apiserver.Listen,
			socketMode: 0o666,
			path:       "/metrics",
			want:       `403 {"code":"FORBIDDEN"`,
		},
		{
			name:       "other_uid_in_another_group_refused",
			listen:     apiserver.Listen,
			socketMode: 0o666,
			allowGID:   gid(otherGroup),
			path:       "/v1/info",
			want:       `403 {"code":"FORBIDDEN","message":"uid 65534 may not use this marshald: it serves root, and members of group 54321;`,
		},
		{
			name:       "allowed_by_primary_group",
			listen:     apiserver.Listen,
			socketMode: 0o666,
			allowGID:   gid(nogroup),
			path:       "/v1/info",
			want:       `200 {"version":"test"`,
		},
		{
			name:     "allowed_by_supplementary_group",
			listen:   func(path string) (net.Listener, error) { return apiserver.ListenGroup(path, otherGroup) },
			allowGID: gid(otherGroup),
			groups:   []uint32{otherGroup},
			path:     "/v1/info",
			want:     `200 {"version":"test"`,
		},
		{
			name:   "default_socket_mode_stops_other_uids_at_connect",
			listen: apiserver.Listen,
			path:   "/v1/info",
			want:   "error ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(socketDir(t), "marshal.sock")
			ln, err := tc.listen(socket)
			if err != nil {
				t.Fatal(err)
			}
			if tc.socketMode != 0 {
				if err := os.Chmod(socket, tc.socketMode); err != nil {
					t.Fatal(err)
				}
			}
			d := apiservertest.NewDaemon()
			d.SetInfo(apiservertestInfo)
			s := apiserver.New(d, apiserver.Options{AllowGID: tc.allowGID, Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("marshal_agents_live 0\n"))
			})})
			apiservertest.ServeOn(t, s, ln)

			got := getAs(t, socket, tc.path, nobody, nogroup, tc.groups...)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("GET %s as uid %d = %q, want it to start with %q", tc.path, nobody, got, tc.want)
			}
			if tc.want == "error " && !strings.Contains(got, "permission denied") {
				t.Errorf("connect as uid %d = %q, want permission denied", nobody, got)
			}
			// Root is always served.
			if status, _, body := call(t, socket, "GET", "/v1/info", ""); status != 200 {
				t.Errorf("GET /v1/info as root = %d %s, want 200", status, body)
			}
		})
	}
}

var apiservertestInfo = localapi.Info{Version: "test"}
