package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/version"
)

func TestVersion(t *testing.T) {
	h := newHarness(t)
	client := version.Get()
	tests := []struct {
		name       string
		args       []string
		wantOut    string
		wantErr    string
		wantCode   int
		wantDaemon string // in -o json; "" for none
	}{
		{name: "client_and_daemon", args: []string{"version"},
			wantOut: "marshalctl " + client.String() + "\nmarshald   test at " + h.socket + "\n"},
		{name: "client_only", args: []string{"version", "--client"},
			wantOut: "marshalctl " + client.String() + "\n"},
		{name: "json", args: []string{"version", "-o", "json"}, wantDaemon: "test"},
		{name: "json_client_only", args: []string{"version", "--client", "-o", "json"}},
		{name: "bad_output", args: []string{"version", "-o", "yaml"}, wantCode: ExitUsage,
			wantErr: `unknown output format "yaml" (want json)`},
		{name: "no_arguments", args: []string{"version", "extra"}, wantCode: ExitUsage,
			wantErr: "takes 0 argument(s), got 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(t, "", tc.args...)
			if r.code != tc.wantCode || !strings.Contains(r.stderr, tc.wantErr) || (tc.wantErr == "" && r.stderr != "") {
				t.Fatalf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.wantCode, tc.wantErr)
			}
			if tc.wantCode != 0 {
				return
			}
			if !strings.Contains(strings.Join(tc.args, " "), "json") {
				if r.stdout != tc.wantOut {
					t.Errorf("%q printed %q, want %q", tc.args, r.stdout, tc.wantOut)
				}
				return
			}
			var got versionOutput
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%q: %v\n%s", tc.args, err, r.stdout)
			}
			if got.Client != client {
				t.Errorf("%q: client = %+v, want %+v", tc.args, got.Client, client)
			}
			switch {
			case tc.wantDaemon == "" && got.Daemon != nil:
				t.Errorf("%q: daemon = %+v, want none", tc.args, got.Daemon)
			case tc.wantDaemon != "" && (got.Daemon == nil || got.Daemon.Version != tc.wantDaemon || got.Daemon.Socket != h.socket):
				t.Errorf("%q: daemon = %+v, want version %q at %s", tc.args, got.Daemon, tc.wantDaemon, h.socket)
			}
		})
	}
}

func TestVersionWithoutDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	h := &harness{socket: socket}
	r := h.run(t, "", "version")
	if r.code != 0 || r.stdout != "marshalctl "+version.Get().String()+"\n" {
		t.Errorf("version without a daemon: exit %d, %q; want exit 0 and marshalctl's version alone", r.code, r.stdout)
	}
	if want := "note: marshald's version is unknown: marshald is not running at " + socket; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("version without a daemon: stderr %q, want it to start %q", r.stderr, want)
	}
}

// TestVersionFromLinker sets the variables the Makefile's -ldflags -X set
// and checks that version prints them.
func TestVersionFromLinker(t *testing.T) {
	oldVersion, oldCommit := version.Version, version.Commit
	t.Cleanup(func() { version.Version, version.Commit = oldVersion, oldCommit })
	version.Version, version.Commit = "v1.4.0", "0123456789abcdef0123456789abcdef01234567"

	h := &harness{socket: filepath.Join(t.TempDir(), "none.sock")}
	r := h.run(t, "", "version", "--client")
	if !strings.HasPrefix(r.stdout, "marshalctl v1.4.0 (commit 0123456789ab, go") {
		t.Errorf("version --client = %q, want v1.4.0 and the commit's first 12 digits", r.stdout)
	}
	r = h.run(t, "", "version", "--client", "-o", "json")
	var got versionOutput
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Client.Version != "v1.4.0" || got.Client.Commit != version.Commit {
		t.Errorf("version --client -o json = %+v, want v1.4.0 and the full commit", got.Client)
	}
}
