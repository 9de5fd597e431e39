//go:build linux

package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/testutil"
)

// A state disk that fills up refuses the launches marshald cannot record,
// each with a definite code and nothing started, while marshald keeps
// serving and governing the agents that run; once space returns,
// admission works again without a restart.
func TestFullStateDiskRefusesLaunchesAndKeepsServing(t *testing.T) {
	fs := testutil.NewTmpfs(t, 16<<20)
	root := t.TempDir()
	d := newDaemon(t)
	d.state = filepath.Join(fs.Dir, "state")
	d.write("all.yaml", launchManifests(root, "{cpu_milli: 1000, memory_bytes: 1073741824, tasks: 512}",
		launchWorkspace{name: "gated", participation: "required"},
		launchWorkspace{name: "free", participation: "none"},
	))
	// The pressure of the small disk is not what this test is about.
	d.start("--pressure", "off")
	d.waitReady("gated", "free")

	// An agent that runs through the full disk, until its stdin closes.
	running := d.startRun("-w", "free", "--", "sh", "-c", "read x; touch survived")
	workspaces := d.watch("workspaces")
	workspaces.until(t, "free", "one live agent", func(o map[string]any) bool { return field(o, "status", "live") == 1.0 })

	filler := fs.Fill(t, "filler")
	// A launch whose writes still fit in space the state files hold runs:
	// the journal's free pages and the record log's last page. One that
	// does not fit is refused, whichever write the full disk fails
	// (the journal's, or the launch record's), and nothing starts.
	refusal := regexp.MustCompile(`^(RESOURCE_AUTHORITY_UNAVAILABLE|INTERNAL): (.*)\nattempt (-|[0-9a-f]{32}), process \d+, state ([a-z_]+); nothing was started\n$`)
	journalRefused := false
	for n := 0; n < 200 && !journalRefused; n++ {
		r := d.runNow("-w", "gated", "--", "touch", "marker")
		if r.code == 0 {
			if err := os.Remove(filepath.Join(root, "marker")); err != nil {
				t.Fatalf("launch %d ran but did not run its command: %v", n, err)
			}
			continue
		}
		m := refusal.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("launch %d on a full disk: exit %d, stderr:\n%s\nwant a refusal with a definite code", n, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(root, "marker")); err == nil {
			t.Fatal("a launch refused on a full disk started something")
		}
		journalRefused = m[1] == "RESOURCE_AUTHORITY_UNAVAILABLE" && m[4] == "not_recorded"
	}
	if !journalRefused {
		t.Fatal("no launch on the full disk was refused by the journal")
	}
	if !d.running() {
		t.Fatalf("marshald exited on a full state disk:\n%s", d.log.String())
	}

	// marshald says why, and serves what needs no disk.
	if got := d.admissionStatus(); got.Ready || got.NotReady != "journal_full" || got.NotReadySince == "" {
		t.Fatalf("admission on a full disk = %+v, want not ready: journal_full, since a moment", got)
	}
	if out := d.mustCtl("describe", "host", "local"); !strings.Contains(out, "Ready:    False (journal_full since") || !strings.Contains(out, "the state disk is full") {
		t.Errorf("describe host on a full disk does not say why admission is refused:\n%s", out)
	}
	doctor := d.ctl("doctor")
	if !strings.Contains(doctor.stdout, "the state disk is full") {
		t.Errorf("doctor on a full disk does not say the state disk is full: exit %d\n%s", doctor.code, doctor.stdout)
	}
	d.mustCtl("get", "workspaces")

	// The running agent ends while the disk is full: it is seen to end.
	running.stdin.Close()
	if code := running.wait(t); code != 0 {
		t.Fatalf("the agent running through the full disk exited %d", code)
	}
	workspaces.until(t, "free", "no live agent", func(o map[string]any) bool { return field(o, "status", "live") == 0.0 })

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The next launch is the next try, and is admitted.
	if r := d.runNow("-w", "gated", "--", "touch", "marker"); r.code != 0 {
		t.Fatalf("launch after space returned: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := d.admissionStatus(); !got.Ready || got.NotReady != "" {
		t.Fatalf("admission after space returned = %+v, want ready", got)
	}
	if r := d.runNow("-w", "free", "--", "true"); r.code != 0 {
		t.Fatalf("a launch after space returned: exit %d\n%s", r.code, r.stderr)
	}
	d.waitSettled(t)
	d.stop()
}

// admissionState is the host's admission readiness.
type admissionState struct {
	Ready         bool   `json:"ready"`
	NotReady      string `json:"notReady"`
	NotReadySince string `json:"notReadySince"`
}

func (d *daemon) admissionStatus() admissionState {
	d.t.Helper()
	var list struct {
		Items []struct {
			Status struct {
				Admission admissionState `json:"admission"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(d.get("/v1/objects/hosts"), &list); err != nil || len(list.Items) != 1 {
		d.t.Fatalf("listing hosts: %v", err)
	}
	return list.Items[0].Status.Admission
}
