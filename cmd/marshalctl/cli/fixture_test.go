package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/localapi"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is the fixed time ages are measured at.
var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// asMarshalctl, set in the environment, makes the test binary run as
// marshalctl: run --timeout starts a marshalctl of its own, which in these
// tests is the test binary.
const asMarshalctl = "MARSHALCTL_TEST_AS_MARSHALCTL"

func TestMain(m *testing.M) {
	if os.Getenv(asMarshalctl) == "1" {
		err := Run(context.Background(), os.Args[1:], Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		os.Exit(ExitCode(err))
	}
	os.Setenv(asMarshalctl, "1")
	timeNow = func() time.Time { return now }
	goleak.VerifyTestMain(m)
}

func ago(d time.Duration) time.Time { return now.Add(-d) }

func i64(v int64) *int64 { return &v }

const agentID = "3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c"

// fixture returns the objects of a small, lived-in host.
func fixture() []any {
	coder := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	coder.Metadata = v1alpha1.ObjectMeta{Name: "coder", Labels: map[string]string{"team": "platform", "tier": "gold"},
		Generation: 2, CreationTimestamp: ago(time.Hour)}
	coder.Spec.Limits = &v1alpha1.Limits{CPUMilli: i64(2000), MemoryBytes: i64(4 << 30), Tasks: i64(1024)}
	coder.Spec.Filesystem = &v1alpha1.FilesystemSpec{Rules: []v1alpha1.FilesystemRule{
		{Access: v1alpha1.FileWrite, Paths: []string{"~/.ssh/known_hosts"}},
		{Access: v1alpha1.FileNone, Paths: []string{"~/.cache", "/run/user/1000/docker.sock"}},
	}}
	coder.Default()
	coder.Status.ObservedGeneration = 2
	coder.Status.Slice = "marshal-coder.slice"
	coder.Status.Agents = 1
	coder.Status.Limits = []v1alpha1.LimitStatus{{Resource: "cpu", Requested: 2000, Applied: 2000,
		Enforcement: v1alpha1.Enforcement{Resource: "cpu", Level: v1alpha1.LevelKernel, Method: "cgroup_v1", Controller: "cpu.cfs_quota_us"}}}
	coder.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue,
		Reason: "LimitsApplied", Message: "slice marshal-coder.slice carries its limits", LastTransitionTime: ago(59 * time.Minute), ObservedGeneration: 2}}

	writer := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	writer.Metadata = v1alpha1.ObjectMeta{Name: "writer", Generation: 1, CreationTimestamp: ago(50 * time.Hour)}
	writer.Default()
	writer.Status.Slice = "marshal-writer.slice"
	writer.Status.Conditions = []v1alpha1.Condition{
		{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, Reason: "SliceReady", LastTransitionTime: ago(50 * time.Hour)},
		{Type: v1alpha1.ConditionInvalid, Status: v1alpha1.ConditionTrue, Reason: "ManifestInvalid",
			Message: "profiles.yaml:31: Profile \"writer\": spec.limitz: unknown field\nprofiles.yaml:32: another", LastTransitionTime: ago(3 * time.Minute)},
	}

	webapp := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	webapp.Metadata = v1alpha1.ObjectMeta{Name: "webapp", Generation: 1, CreationTimestamp: ago(4 * time.Second)}
	webapp.Spec = v1alpha1.WorkspaceSpec{Root: "/home/dev/src/webapp", Profile: "coder",
		Resources: &v1alpha1.ResourcesSpec{Participation: v1alpha1.ParticipationRequired}}
	webapp.Default()
	webapp.Status.Live = 1
	webapp.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, Reason: "Ready", LastTransitionTime: ago(4 * time.Second)}}

	docs := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	docs.Metadata = v1alpha1.ObjectMeta{Name: "docs", Generation: 1, CreationTimestamp: ago(4 * time.Second)}
	docs.Spec = v1alpha1.WorkspaceSpec{Root: "/home/dev/src/docs", Profile: "writer"}
	docs.Default()
	docs.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionFalse,
		Reason: "RootMissing", Message: "root /home/dev/src/docs does not exist", LastTransitionTime: ago(4 * time.Second)}}

	host := v1alpha1.New(v1alpha1.KindHost).(*v1alpha1.Host)
	host.Metadata = v1alpha1.ObjectMeta{Name: "local", Generation: 1, CreationTimestamp: ago(6 * 24 * time.Hour)}
	host.Default()
	host.Status.Backend = "cgroupfs"
	host.Status.Capacity = v1alpha1.Amounts{CPUMilli: 1600, MemoryBytes: 8 << 30, Tasks: 4096}
	host.Status.Measured = v1alpha1.Amounts{CPUMilli: 2000, MemoryBytes: 16 << 30, Tasks: 63000}
	host.Status.Enforcement = []v1alpha1.Enforcement{
		{Resource: "cpu", Level: v1alpha1.LevelKernel, Method: "cgroup_v1", Controller: "cpu.cfs_quota_us"},
		{Resource: "memory", Level: v1alpha1.LevelKernel, Method: "cgroup_v1", Controller: "memory.limit_in_bytes"},
		{Resource: "pids", Level: v1alpha1.LevelAccounted, Method: "accounting"},
	}
	host.Status.Admission = &v1alpha1.AdmissionStatus{
		Ready:     true,
		Capacity:  v1alpha1.Amounts{CPUMilli: 1600, MemoryBytes: 8 << 30, Tasks: 4096},
		Target:    v1alpha1.Amounts{CPUMilli: 800, MemoryBytes: 4 << 30, Tasks: 2048},
		Committed: v1alpha1.Amounts{CPUMilli: 250, MemoryBytes: 256 << 20, Tasks: 32},
		Free:      v1alpha1.Amounts{CPUMilli: 550, MemoryBytes: 4<<30 - 256<<20, Tasks: 2016},
		Pressure:  "constrained", PressureReason: "cpu_stall", PressureMessage: "cpu pressure",
		PressureSince: ago(12 * time.Second), Charged: 1,
	}
	host.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, Reason: "CapacityKnown", LastTransitionTime: ago(6 * 24 * time.Hour)}}

	agent := &v1alpha1.Agent{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindAgent},
		Metadata: v1alpha1.ObjectMeta{Name: "marshal-coder-" + agentID + ".scope"},
		Status: v1alpha1.AgentStatus{
			Profile: "coder", ID: agentID, Workspace: "webapp", Attempt: agentID, Launched: true,
			Path:      "/marshal.slice/marshal-coder.slice/marshal-coder-" + agentID + ".scope",
			Populated: true,
			Usage:     v1alpha1.AgentUsage{CPUUsec: 1_234_567, MemoryBytes: 432_013_312, Tasks: 14},
			Since:     ago(2 * time.Minute),
		},
	}
	orphan := &v1alpha1.Agent{
		TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindAgent},
		Metadata: v1alpha1.ObjectMeta{Name: "marshal-writer-00000000000000000000000000000001.scope"},
		Status: v1alpha1.AgentStatus{
			Profile: "writer", ID: "00000000000000000000000000000001",
			Path:  "/marshal.slice/marshal-writer.slice/marshal-writer-00000000000000000000000000000001.scope",
			Usage: v1alpha1.AgentUsage{CPUUsec: 90_000_000, MemoryBytes: 1536, Tasks: 1},
			Since: ago(26 * time.Hour),
		},
	}
	return []any{coder, writer, webapp, docs, host, agent, orphan}
}

func fixtureEvents() []v1alpha1.Event {
	return []v1alpha1.Event{
		{Type: v1alpha1.EventNormal, Object: v1alpha1.ObjectReference{Kind: "Profile", Name: "coder"}, Reason: "SliceCreated",
			Message: "created slice marshal-coder.slice", Count: 1, FirstSeen: ago(time.Hour), LastSeen: ago(time.Hour)},
		{Type: v1alpha1.EventNormal, Object: v1alpha1.ObjectReference{Kind: "Profile", Name: "coder"}, Reason: "LimitsApplied",
			Message: "cpu 2000m, memory 4GiB, tasks 1024", Count: 2, FirstSeen: ago(59 * time.Minute), LastSeen: ago(10 * time.Minute)},
		{Type: v1alpha1.EventWarning, Object: v1alpha1.ObjectReference{Kind: "Profile", Name: "writer"}, Reason: "ManifestInvalid",
			Message: "profiles.yaml:31: Profile \"writer\": spec.limitz: unknown field", Count: 1, FirstSeen: ago(3 * time.Minute), LastSeen: ago(3 * time.Minute)},
		{Type: v1alpha1.EventWarning, Object: v1alpha1.ObjectReference{Kind: "Workspace", Name: "docs"}, Reason: "RootMissing",
			Message: "root /home/dev/src/docs does not exist", Count: 3, FirstSeen: ago(10 * time.Minute), LastSeen: ago(4 * time.Second)},
	}
}

// harness is marshalctl against a real apiserver on a real socket, backed
// by an in-memory daemon whose apply and delete write a real config dir.
type harness struct {
	d      *apiservertest.Daemon
	socket string
	config string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{d: apiservertest.NewDaemon(), config: t.TempDir()}
	h.d.SetInfo(localapi.Info{Version: "test", Mode: "user", Ready: true,
		Source: localapi.SourceStatus{Dir: h.config, Files: 3, Objects: 5}})
	h.d.UseConfigDir(h.config)
	h.socket = apiservertest.Serve(t, h.d, apiserver.Options{})
	return h
}

// withFixture loads the fixture's objects and events.
func (h *harness) withFixture() *harness {
	for _, obj := range fixture() {
		h.d.Set(obj)
	}
	for _, e := range fixtureEvents() {
		h.d.Record(e)
	}
	return h
}

// result is what one run of marshalctl printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

func (h *harness) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), append([]string{"--socket", h.socket}, args...),
		Streams{In: strings.NewReader(stdin), Out: &out, Err: &errOut})
	return result{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
}

// writeConfig writes a file into the config dir.
func (h *harness) writeConfig(t *testing.T, rel, data string) {
	t.Helper()
	path := filepath.Join(h.config, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// applyNow declares the files through the daemon, as an earlier apply
// would have.
func (h *harness) applyNow(t *testing.T, paths ...string) {
	t.Helper()
	var files []localapi.ApplyFile
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, localapi.ApplyFile{Name: p, Data: data})
	}
	res, err := h.d.Apply(t.Context(), localapi.ApplyRequest{Files: files})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("applying %v: %v %v", paths, err, res.Errors)
	}
}

// doctorDirs makes marshald report the harness's config dir and a state
// dir beside it, as doctor's local checks look at them.
func (h *harness) doctorDirs(t *testing.T) {
	t.Helper()
	info := localapi.Info{Version: "test", PID: 4242, Mode: "system", ConfigDir: h.config, StateDir: filepath.Join(h.config, "state")}
	h.d.SetInfo(info)
}

// configFiles lists the config dir, hidden files too.
func (h *harness) configFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(h.config, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(h.config, path)
			files = append(files, rel)
		}
		return err
	})
	return files
}

// golden compares got with testdata/name.golden, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows how got differs from want.
func lineDiff(want, got string) string {
	var b strings.Builder
	writeUnified(&b, "want", "got", lines(want), lines(got))
	return b.String()
}

// transcript is a run as a golden file holds it.
func (r result) transcript(args []string, replace ...string) string {
	s := fmt.Sprintf("$ marshalctl %s\n--- stdout\n%s--- stderr\n%s--- exit %d\n",
		strings.Join(args, " "), r.stdout, r.stderr, r.code)
	return strings.NewReplacer(replace...).Replace(s)
}

// syncBuffer is an output stream that a watch writes while the test
// reads it, and that signals every write.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// background runs marshalctl until the returned stop is called; stop
// returns what it printed and its exit code.
func (h *harness) background(t *testing.T, args ...string) (out *syncBuffer, stop func() result) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out, errOut := newSyncBuffer(), newSyncBuffer()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append([]string{"--socket", h.socket}, args...), Streams{In: strings.NewReader(""), Out: out, Err: errOut})
	}()
	var once sync.Once
	var res result
	stop = func() result {
		once.Do(func() {
			cancel()
			err := <-done
			res = result{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
		})
		return res
	}
	t.Cleanup(func() { stop() })
	return out, stop
}
