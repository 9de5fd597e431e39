//go:build linux

package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/cgroup/cgrouptest"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// These tests run marshald's wiring on real parts: a config dir and a
// state dir in temporary directories, the real socket, bbolt files and
// fsnotify. Only the cgroup tree is a fake (cgrouptest), so that they run
// without root, and pressure is off, so that the machine's load decides
// nothing.

// world is what a daemon under test runs on.
type world struct {
	dir, config, root string
	cfg               Config
}

// newWorld makes a config dir declaring the Host, Profile and Workspace
// of pressureManifests, the Profile with tasks limit tasks, a state dir, a
// socket path short enough for the kernel, and a fake cgroup tree.
func newWorld(t *testing.T, tasks string) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{dir: dir, config: filepath.Join(dir, "manifests.d"), root: filepath.Join(dir, "web")}
	for _, d := range []string{w.config, w.root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.declare(t, tasks)
	run := testutil.ShortDir(t)
	fake := cgrouptest.New(t, cgrouptest.Options{})
	w.cfg = Config{
		Mode: ModeSystem, ConfigDir: w.config, StateDir: filepath.Join(dir, "state"),
		Socket: filepath.Join(run, "marshal.sock"), Backend: "auto", CgroupRoot: "/marshal",
		LogFormat: "text", AllowGID: -1, Relist: time.Minute, Pressure: PressureOff,
		backend: fake, cgroupMount: fake.Mount(),
	}
	return w
}

// declare writes the manifests with the profile's tasks limit.
func (w *world) declare(t *testing.T, tasks string) {
	t.Helper()
	m := strings.NewReplacer("ROOT", w.root,
		"metadata: {name: coder}\n", "metadata: {name: coder}\nspec: {limits: {tasks: "+tasks+"}}\n").Replace(pressureManifests)
	tmp := filepath.Join(w.config, ".all.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.config, "all.yaml")); err != nil {
		t.Fatal(err)
	}
}

// start runs a daemon of cfg until the returned stop is called or t
// ends; stop checks that Run returned nil.
func start(t *testing.T, cfg Config) (d *Daemon, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	d, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run after cancel = %v, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return d, stop
}

// unixHTTP is an HTTP client of the socket, for the routes package client
// has no method for.
func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
}

// marshald serves what its config dir declares, as its controllers and
// its admission authority see it, on the real socket; every route of the
// local API is wired; stopping it removes the socket.
func TestDaemonServesWhatTheConfigDirDeclares(t *testing.T) {
	w := newWorld(t, "64")
	_, stop := start(t, w.cfg)
	c := client.New(w.cfg.Socket)

	var ws v1alpha1.Workspace
	watchUntil(t, c, "workspaces", &ws, "the workspace Ready", func() bool {
		c := controllers.FindCondition(ws.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == v1alpha1.ConditionTrue && c.ObservedGeneration == 1
	})
	var p v1alpha1.Profile
	watchUntil(t, c, "profiles", &p, "the profile's slice", func() bool {
		return p.Status.Slice != "" && p.Status.ObservedGeneration == 1
	})
	// The declared capacity reached the authority.
	var h v1alpha1.Host
	watchUntil(t, c, "hosts", &h, "the Host's admission status", func() bool {
		return h.Status.Admission != nil && h.Status.Admission.Capacity.CPUMilli == 1500
	})

	info, err := c.Info(t.Context())
	if err != nil || info.Backend != "fake" || info.ConfigDir != w.config || info.Socket != w.cfg.Socket || info.Source.Objects != 3 {
		t.Errorf("Info = %+v, %v", info, err)
	}

	// The run route reaches the launcher: a workspace nobody declared is
	// refused; a declared one is explained.
	res := postRun(t, w.cfg.Socket, localapi.RunRequest{Workspace: "nope", Argv: []string{"true"}})
	if r := res.Refusal; r == nil || r.Code != localapi.RefusalWorkspaceNotReady || r.Process != os.Getpid() {
		t.Errorf("run in an undeclared workspace = %+v, want WORKSPACE_NOT_READY for pid %d", res, os.Getpid())
	}
	res = postRun(t, w.cfg.Socket, localapi.RunRequest{Workspace: "web", Argv: []string{"true"}, Explain: true})
	if e := res.Explain; e == nil || e.Admission.Participation != "required" || e.Admission.Request.CPUMilli != 1000 || !e.Admission.Fits {
		t.Errorf("explain = %+v", res)
	}

	hc := unixHTTP(w.cfg.Socket)
	for _, tc := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", localapi.RunPath, 405, `"code":"BAD_REQUEST"`},
		{"GET", localapi.MetricsPath, 200, "marshal_declared_objects"},
		{"POST", localapi.MetricsPath, 405, "use GET"},
		{"POST", localapi.BackupPath, 405, "use GET"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, "http://marshald"+tc.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s = %d %.200s, want %d with %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}

	// A backup is a journal the authority opens.
	backup := filepath.Join(t.TempDir(), "admission.db")
	if _, err := c.BackupTo(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	a, err := admission.Open(backup, admission.Options{})
	if err != nil {
		t.Fatalf("opening the backup: %v", err)
	}
	a.Close()
	if entries, _ := os.ReadDir(w.cfg.StateDir); len(entries) == 0 {
		t.Error("the state dir is empty")
	} else {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".backup-") {
				t.Errorf("the backup left %s in the state dir", e.Name())
			}
		}
	}

	stop()
	if _, err := os.Lstat(w.cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after stop: %v", err)
	}
}

// metadata.generation and creationTimestamp survive restarts: the same
// spec keeps its generation, a spec changed while marshald was stopped
// gets the next one.
func TestGenerationsSurviveRestarts(t *testing.T) {
	w := newWorld(t, "64")
	c := client.New(w.cfg.Socket)
	profile := func(what string, gen int64) v1alpha1.Profile {
		t.Helper()
		var p v1alpha1.Profile
		watchUntil(t, c, "profiles", &p, what, func() bool {
			return p.Metadata.Generation == gen && p.Status.ObservedGeneration == gen
		})
		return p
	}

	_, stop := start(t, w.cfg)
	first := profile("the first declaration", 1)
	w.declare(t, "65")
	profile("the edit", 2)
	stop()

	_, stop = start(t, w.cfg)
	again := profile("the same spec after a restart", 2)
	stop()
	if !again.Metadata.CreationTimestamp.Equal(first.Metadata.CreationTimestamp) {
		t.Errorf("creationTimestamp after a restart = %v, want %v", again.Metadata.CreationTimestamp, first.Metadata.CreationTimestamp)
	}

	w.declare(t, "66")
	start(t, w.cfg)
	edited := profile("a spec edited while stopped", 3)
	if !edited.Metadata.CreationTimestamp.Equal(first.Metadata.CreationTimestamp) {
		t.Errorf("creationTimestamp after an edit = %v, want %v", edited.Metadata.CreationTimestamp, first.Metadata.CreationTimestamp)
	}
	var ws v1alpha1.Workspace
	watchUntil(t, c, "workspaces", &ws, "the workspace", func() bool { return ws.Metadata.Generation == 1 })
}

// When New fails after it opened things (here at the socket, the last
// step but one), it leaves nothing open: no goroutine (the controllers'
// root watch among them), no lock on the state dir or the journal.
func TestNewFailingClosesWhatItOpened(t *testing.T) {
	w := newWorld(t, "64")
	if err := os.WriteFile(w.cfg.Socket, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	_, err := New(t.Context(), w.cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, apiserver.ErrNotSocket) {
		t.Fatalf("New with a file at the socket path = %v, want ErrNotSocket", err)
	}
	goleak.VerifyNone(t, before)

	os.Remove(w.cfg.Socket)
	start(t, w.cfg)
}

// A second marshald on a state dir in use is refused, and says why.
func TestStateDirInUse(t *testing.T) {
	w := newWorld(t, "64")
	start(t, w.cfg)
	other := w.cfg
	other.Socket = filepath.Join(filepath.Dir(w.cfg.Socket), "other.sock")
	_, err := New(t.Context(), other, slog.New(slog.DiscardHandler))
	if !errors.Is(err, state.ErrInUse) || !strings.Contains(err.Error(), "is another marshald running with state dir") {
		t.Errorf("a second New on the state dir = %v, want ErrInUse saying why", err)
	}
}

// A journal lost from a state dir used before is not silently replaced:
// marshald refuses to start until told to begin a new one.
func TestJournalLostIsNotReplacedSilently(t *testing.T) {
	w := newWorld(t, "64")
	_, stop := start(t, w.cfg)
	stop()
	if err := os.Remove(w.cfg.journalFile()); err != nil {
		t.Fatal(err)
	}
	_, err := New(t.Context(), w.cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, admission.ErrJournalMissing) || !strings.Contains(err.Error(), "--init-journal") {
		t.Fatalf("New without the journal = %v, want ErrJournalMissing naming --init-journal", err)
	}
	w.cfg.InitJournal = true
	start(t, w.cfg)
	if _, err := os.Stat(w.cfg.journalFile()); err != nil {
		t.Errorf("--init-journal made no journal: %v", err)
	}
}
