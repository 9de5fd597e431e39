package applier

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	coder = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata:
  name: coder
  labels: {team: platform}
spec:
  limits: {cpu_milli: 2000}
`
	// coderExplicit is coder with its defaults written out.
	coderExplicit = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder, labels: {team: platform}}
spec:
  isolation: cgroup
  orphans: keep
  limits: {cpu_milli: 2000}
`
	coderMoreCPU = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder, labels: {team: platform}}
spec:
  limits: {cpu_milli: 3000}
`
	coderNewLabel = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder, labels: {team: web}}
spec:
  limits: {cpu_milli: 2000}
`
	writer = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: writer}
spec: {}
`
	webapp = `apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: webapp}
spec:
  root: /srv/webapp
  profile: coder
  exec:
    env: {CI: "true", ZERO: "0123", NOTHING: "null", EMPTY: ""}
    argv0: ["true", "yes", /bin/sh]
  resources: {participation: required}
`
	hostLocal = `apiVersion: marshal.dev/v1alpha1
kind: Host
metadata: {name: local}
spec: {capacity: {cpu_milli: 1600}}
`
	hostOther = `apiVersion: marshal.dev/v1alpha1
kind: Host
metadata: {name: other}
spec: {}
`
)

func file(name, data string) localapi.ApplyFile {
	return localapi.ApplyFile{Name: name, Data: []byte(data)}
}

func writeFile(t *testing.T, dir, rel, data string) {
	t.Helper()
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func scan(t *testing.T, dir string) *Snapshot {
	t.Helper()
	s, err := Scan(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// apply scans dir, as the daemon's declarations would show it, and
// applies files.
func apply(t *testing.T, dir string, dryRun bool, files ...localapi.ApplyFile) localapi.ApplyResult {
	t.Helper()
	res, err := Apply(t.Context(), dir, scan(t, dir), localapi.ApplyRequest{Files: files, DryRun: dryRun})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// actions returns "Kind/name action" for every outcome.
func actions(outs []localapi.Outcome) []string {
	var got []string
	for _, o := range outs {
		got = append(got, o.Kind+"/"+o.Name+" "+o.Action)
	}
	return got
}

// tree lists every file under dir, hidden ones too, relative to it.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestApplyOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		existing map[string]string // config dir before
		files    []localapi.ApplyFile
		want     []string
		reason   string // in the first outcome's reason
		after    []string
	}{
		{
			name:  "created_when_not_declared",
			files: []localapi.ApplyFile{file("coder.yaml", coder)},
			want:  []string{"Profile/coder created"},
			after: []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "unchanged_when_equal",
			existing: map[string]string{"applied/profile-coder.yaml": coder},
			files:    []localapi.ApplyFile{file("coder.yaml", coder)},
			want:     []string{"Profile/coder unchanged"},
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "unchanged_when_equal_after_defaulting",
			existing: map[string]string{"applied/profile-coder.yaml": coder},
			files:    []localapi.ApplyFile{file("coder.yaml", coderExplicit)},
			want:     []string{"Profile/coder unchanged"},
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "configured_when_spec_changes",
			existing: map[string]string{"applied/profile-coder.yaml": coder},
			files:    []localapi.ApplyFile{file("coder.yaml", coderMoreCPU)},
			want:     []string{"Profile/coder configured"},
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "configured_when_labels_change",
			existing: map[string]string{"applied/profile-coder.yaml": coder},
			files:    []localapi.ApplyFile{file("coder.yaml", coderNewLabel)},
			want:     []string{"Profile/coder configured"},
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "configured_when_applied_file_is_broken",
			existing: map[string]string{"applied/profile-coder.yaml": "kind: [\n"},
			files:    []localapi.ApplyFile{file("coder.yaml", coder)},
			want:     []string{"Profile/coder configured"},
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "refused_when_declared_in_another_file",
			existing: map[string]string{"profiles.yaml": coder + "---\n" + writer},
			files:    []localapi.ApplyFile{file("mine.yaml", coderMoreCPU)},
			want:     []string{"Profile/coder refused"},
			reason:   "declared in profiles.yaml; edit that file, or delete the object there first",
			after:    []string{"profiles.yaml"},
		},
		{
			name:     "refused_when_declared_in_another_file_alone",
			existing: map[string]string{"team/coder.yaml": coder},
			files:    []localapi.ApplyFile{file("coder.yaml", coder)},
			want:     []string{"Profile/coder refused"},
			reason:   "declared in team/coder.yaml",
			after:    []string{"team/coder.yaml"},
		},
		{
			name:     "refused_second_host",
			existing: map[string]string{"host.yaml": hostLocal},
			files:    []localapi.ApplyFile{file("h.yaml", hostOther)},
			want:     []string{"Host/other refused"},
			reason:   `only one Host may be declared, and Host "local" is declared in host.yaml`,
			after:    []string{"host.yaml"},
		},
		{
			name:     "same_host_through_its_applied_file",
			existing: map[string]string{"applied/host-local.yaml": hostLocal},
			files:    []localapi.ApplyFile{file("h.yaml", strings.Replace(hostLocal, "1600", "1800", 1))},
			want:     []string{"Host/local configured"},
			after:    []string{"applied/host-local.yaml"},
		},
		{
			name:     "refused_when_applied_file_holds_more",
			existing: map[string]string{"applied/profile-coder.yaml": coder + "---\n" + writer},
			files:    []localapi.ApplyFile{file("coder.yaml", coderMoreCPU)},
			want:     []string{"Profile/coder refused"},
			reason:   "applied/profile-coder.yaml also declares Profile/writer",
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "each_object_on_its_own_in_request_order",
			existing: map[string]string{"profiles.yaml": writer, "applied/profile-coder.yaml": coder},
			files: []localapi.ApplyFile{
				file("b.yaml", webapp+"---\n"+writer),
				file("a.yaml", coder),
			},
			want:  []string{"Workspace/webapp created", "Profile/writer refused", "Profile/coder unchanged"},
			after: []string{"applied/profile-coder.yaml", "applied/workspace-webapp.yaml", "profiles.yaml"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for rel, data := range tc.existing {
				writeFile(t, dir, rel, data)
			}
			res := apply(t, dir, false, tc.files...)
			if len(res.Errors) > 0 {
				t.Fatalf("Apply errors: %+v", res.Errors)
			}
			if got := actions(res.Outcomes); !slices.Equal(got, tc.want) {
				t.Errorf("Apply outcomes = %q, want %q", got, tc.want)
			}
			if tc.reason != "" && !strings.Contains(res.Outcomes[0].Reason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", res.Outcomes[0].Reason, tc.reason)
			}
			if got := tree(t, dir); !slices.Equal(got, tc.after) {
				t.Errorf("config dir after Apply = %q, want %q", got, tc.after)
			}
			for rel, data := range tc.existing {
				if slices.Contains(tc.want, res.Outcomes[0].Kind+"/"+res.Outcomes[0].Name+" refused") {
					got, _ := os.ReadFile(filepath.Join(dir, rel))
					if string(got) != data {
						t.Errorf("%s was rewritten by a refused apply", rel)
					}
				}
			}
		})
	}
}

func TestApplyWritesWhatTheLoaderLoads(t *testing.T) {
	dir := t.TempDir()
	files := []localapi.ApplyFile{file("profiles.yaml", coder), file("ws.yaml", webapp), file("host.json", hostLocal)}
	res := apply(t, dir, false, files...)
	want := []string{"Profile/coder created", "Workspace/webapp created", "Host/local created"}
	if got := actions(res.Outcomes); !slices.Equal(got, want) {
		t.Fatalf("Apply outcomes = %q, want %q", got, want)
	}
	loaded, err := loader.LoadDir(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Errors) > 0 {
		t.Fatalf("the written files do not load: %v", loaded.Errors)
	}
	if len(loaded.Objects) != 3 {
		t.Fatalf("loaded %d objects, want 3", len(loaded.Objects))
	}
	// Each file holds the object as sent, defaulted: equal in spec and
	// labels to loading the request's own text.
	for _, f := range files {
		sent := loader.LoadBytes(f.Name, f.Data).Objects[0].Object
		key := keyOf(sent)
		path := filepath.Join(dir, AppliedFile(key.Kind, key.Name))
		got := loader.LoadFile(path)
		if len(got.Errors) > 0 || len(got.Objects) != 1 {
			t.Fatalf("LoadFile(%s) = %+v", path, got)
		}
		if same, err := sameDeclaration(got.Objects[0].Object, sent); err != nil || !same {
			spec, _ := specAndLabels(got.Objects[0].Object)
			t.Errorf("%s declares %s, want it as sent (%v)", path, spec, err)
		}
		data, _ := os.ReadFile(path)
		if !strings.HasPrefix(string(data), "# Written by marshalctl apply.") {
			t.Errorf("%s starts %q, want the marshalctl apply header", path, firstLine(data))
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != fileMode {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), os.FileMode(fileMode))
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

func TestRenderLeavesOutServerFields(t *testing.T) {
	obj := loader.LoadBytes("coder.yaml", []byte(coder)).Objects[0].Object.(*v1alpha1.Profile)
	obj.Metadata.Generation = 7
	obj.Metadata.CreationTimestamp = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	obj.Status.Agents = 3
	obj.Status.Conditions = []v1alpha1.Condition{{Type: "Ready", Status: v1alpha1.ConditionTrue}}
	data, err := render(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"status", "generation", "creationTimestamp", "agents", "conditions"} {
		if strings.Contains(string(data), field) {
			t.Errorf("render wrote %q:\n%s", field, data)
		}
	}
	if f := loader.LoadBytes("x.yaml", data); len(f.Errors) > 0 {
		t.Errorf("rendered file does not load: %v\n%s", f.Errors, data)
	}
}

func TestApplyNeverRewritesAnUnchangedObject(t *testing.T) {
	dir := t.TempDir()
	apply(t, dir, false, file("coder.yaml", coder))
	path := filepath.Join(dir, AppliedFile(v1alpha1.KindProfile, "coder"))
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	res := apply(t, dir, false, file("coder.yaml", coderExplicit))
	if got := actions(res.Outcomes); !slices.Equal(got, []string{"Profile/coder unchanged"}) {
		t.Fatalf("second Apply = %q, want unchanged", got)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) {
		t.Errorf("an unchanged object's file was rewritten")
	}
}

func TestApplyRefusesInvalidRequests(t *testing.T) {
	tests := []struct {
		name  string
		files []localapi.ApplyFile
		want  string // in one of the errors, as FILE:LINE: message
	}{
		{
			name:  "unknown_field",
			files: []localapi.ApplyFile{file("good.yaml", writer), file("bad.yaml", strings.Replace(coder, "limits:", "limitz:", 1))},
			want:  "bad.yaml:7: spec.limitz",
		},
		{
			name:  "same_object_in_two_files",
			files: []localapi.ApplyFile{file("a.yaml", coder), file("b.yaml", coderMoreCPU)},
			want:  "declared more than once",
		},
		{
			name:  "two_hosts",
			files: []localapi.ApplyFile{file("a.yaml", hostLocal+"---\n"+hostOther)},
			want:  "only one Host",
		},
		{
			name:  "status_of_the_wrong_type",
			files: []localapi.ApplyFile{file("s.yaml", writer+"status: {agents: 1}\nstatus: {}\n")},
			want:  "s.yaml:6: status: duplicate key",
		},
		{
			name:  "no_objects",
			files: []localapi.ApplyFile{file("empty.yaml", "# nothing\n")},
			want:  "empty.yaml:0: no objects to apply",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, dryRun := range []bool{false, true} {
				res := apply(t, dir, dryRun, tc.files...)
				var got []string
				for _, e := range res.Errors {
					msg := e.Message
					if e.Field != "" {
						msg = e.Field + ": " + msg
					}
					got = append(got, e.File+":"+strconv.Itoa(e.Line)+": "+msg)
				}
				if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.want) }) {
					t.Errorf("Apply errors = %q, want one containing %q", got, tc.want)
				}
				if len(res.Outcomes) > 0 {
					t.Errorf("Apply outcomes = %+v, want none", res.Outcomes)
				}
				if files := tree(t, dir); len(files) > 0 {
					t.Errorf("Apply of an invalid request wrote %q", files)
				}
			}
		})
	}
}

func TestApplyDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "applied/profile-coder.yaml", coder)
	writeFile(t, dir, "profiles.yaml", writer)
	before := tree(t, dir)
	res := apply(t, dir, true,
		file("a.yaml", coderMoreCPU), file("b.yaml", webapp), file("c.yaml", writer))
	want := []string{"Profile/coder configured", "Workspace/webapp created", "Profile/writer refused"}
	if got := actions(res.Outcomes); !slices.Equal(got, want) || !res.DryRun {
		t.Errorf("dry-run Apply = %q (dryRun %v), want %q", got, res.DryRun, want)
	}
	if after := tree(t, dir); !slices.Equal(after, before) {
		t.Errorf("dry run changed the config dir: %q, want %q", after, before)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "applied/profile-coder.yaml")); string(data) != coder {
		t.Errorf("dry run rewrote applied/profile-coder.yaml")
	}
}

func TestApplyNeedsTheConfigDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	_, err := Apply(t.Context(), dir, &Snapshot{}, localapi.ApplyRequest{Files: []localapi.ApplyFile{file("a.yaml", coder)}})
	if !errors.Is(err, ErrNoConfigDir) {
		t.Errorf("Apply into a missing config dir = %v, want ErrNoConfigDir", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Apply created the missing config dir")
	}
}

// TestApplyIsAtomic applies two versions of an object in turn while
// readers load the file and a watcher records every name that appears in
// the directory: a reader only ever sees a whole version, and every other
// name is one the manifest source ignores.
func TestApplyIsAtomic(t *testing.T) {
	dir := t.TempDir()
	apply(t, dir, false, file("coder.yaml", coder))
	applied := filepath.Join(dir, AppliedDir)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(applied); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		names = map[string]bool{}
		wg    sync.WaitGroup
		done  = make(chan struct{})
	)
	wg.Go(func() {
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				mu.Lock()
				names[filepath.Base(ev.Name)] = true
				mu.Unlock()
			case <-w.Errors:
			case <-done:
				return
			}
		}
	})
	path := filepath.Join(applied, "profile-coder.yaml")
	// bad belongs to the reader until wg.Wait.
	var bad []string
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			f := loader.LoadFile(path)
			if len(f.Errors) > 0 || len(f.Objects) != 1 {
				bad = append(bad, f.Path+": "+errorsOf(f))
			}
		}
	})
	versions := []string{coderMoreCPU, coder}
	for i := range 30 {
		res := apply(t, dir, false, file("coder.yaml", versions[i%2]))
		if got := actions(res.Outcomes); !slices.Equal(got, []string{"Profile/coder configured"}) {
			t.Fatalf("Apply #%d = %q, want configured", i, got)
		}
	}
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("a reader saw a partial file %d times, first: %s", len(bad), bad[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if !names["profile-coder.yaml"] {
		t.Errorf("the watcher saw no event for the file: %v", names)
	}
	temps := 0
	for name := range names {
		if name == "profile-coder.yaml" {
			continue
		}
		temps++
		if loader.Matches(name) {
			t.Errorf("apply made %q, a name the manifest source would load", name)
		}
	}
	if temps == 0 {
		t.Errorf("the watcher saw no temporary file; writes are not going through one")
	}
	if files := tree(t, dir); !slices.Equal(files, []string{"applied/profile-coder.yaml"}) {
		t.Errorf("config dir after the applies = %q, want only the applied file", files)
	}
}

func errorsOf(f loader.File) string {
	var msgs []string
	for _, e := range f.Errors {
		msgs = append(msgs, e.Error())
	}
	if len(msgs) == 0 {
		return "no objects"
	}
	return strings.Join(msgs, "; ")
}

func TestDeleteOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		existing map[string]string
		req      localapi.DeleteRequest
		want     []string
		reason   string
		after    []string
	}{
		{
			name:     "applied_file_removed",
			existing: map[string]string{"applied/profile-coder.yaml": coder, "profiles.yaml": writer},
			req:      localapi.DeleteRequest{Kind: "Profile", Name: "coder"},
			want:     []string{"Profile/coder deleted"},
			after:    []string{"profiles.yaml"},
		},
		{
			name:     "a_file_apply_did_not_write_is_refused",
			existing: map[string]string{"team/only-coder.yml": coder, "profiles.yaml": writer},
			req:      localapi.DeleteRequest{Kind: "profile", Name: "coder"},
			want:     []string{"Profile/coder refused"},
			reason:   "declared in team/only-coder.yml; remove it there",
			after:    []string{"profiles.yaml", "team/only-coder.yml"},
		},
		{
			name:     "refused_in_a_shared_file",
			existing: map[string]string{"profiles.yaml": coder + "---\n" + writer},
			req:      localapi.DeleteRequest{Kind: "Profile", Name: "coder"},
			want:     []string{"Profile/coder refused"},
			reason:   "declared in profiles.yaml; remove it there",
			after:    []string{"profiles.yaml"},
		},
		{
			name:     "applied_file_edited_to_hold_more",
			existing: map[string]string{"applied/profile-coder.yaml": coder + "---\n" + writer},
			req:      localapi.DeleteRequest{Kind: "Profile", Name: "coder"},
			want:     []string{"Profile/coder refused"},
			reason:   "declared with 1 other object in applied/profile-coder.yaml; remove it from that file",
			after:    []string{"applied/profile-coder.yaml"},
		},
		{
			name:     "not_found",
			existing: map[string]string{"profiles.yaml": writer},
			req:      localapi.DeleteRequest{Kind: "Workspace", Name: "webapp"},
			want:     []string{"Workspace/webapp not_found"},
			after:    []string{"profiles.yaml"},
		},
		{
			name:     "files_naming_objects_of_a_hand_written_file",
			existing: map[string]string{"profiles.yaml": coder + "---\n" + writer, "ws.yaml": webapp},
			req: localapi.DeleteRequest{Files: []localapi.ApplyFile{
				file("local/profiles.yaml", writer+"---\n"+coder),
			}},
			want:  []string{"Profile/writer refused", "Profile/coder refused"},
			after: []string{"profiles.yaml", "ws.yaml"},
		},
		{
			name: "files_naming_applied_and_hand_written_objects",
			existing: map[string]string{"profiles.yaml": coder + "---\n" + writer,
				"applied/workspace-webapp.yaml": webapp},
			req: localapi.DeleteRequest{Files: []localapi.ApplyFile{
				file("local.yaml", webapp+"---\n"+coder+"---\n"+hostLocal),
			}},
			want:  []string{"Workspace/webapp deleted", "Profile/coder refused", "Host/local not_found"},
			after: []string{"profiles.yaml"},
		},
		{
			name: "selector",
			existing: map[string]string{"applied/profile-coder.yaml": coder, "applied/profile-writer.yaml": writer,
				"applied/profile-other.yaml": strings.ReplaceAll(coder, "coder", "other")},
			req:   localapi.DeleteRequest{Kind: "Profile", Selector: "team in (platform, web)"},
			want:  []string{"Profile/coder deleted", "Profile/other deleted"},
			after: []string{"applied/profile-writer.yaml"},
		},
		{
			name:     "selector_matching_nothing",
			existing: map[string]string{"applied/profile-writer.yaml": writer},
			req:      localapi.DeleteRequest{Kind: "Profile", Selector: "team"},
			want:     nil,
			after:    []string{"applied/profile-writer.yaml"},
		},
		{
			name:     "status_in_the_files_is_ignored",
			existing: map[string]string{"applied/profile-writer.yaml": writer},
			req: localapi.DeleteRequest{Files: []localapi.ApplyFile{
				file("got.yaml", writer+"status: {agents: 1}\n"),
			}},
			want:  []string{"Profile/writer deleted"},
			after: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, dryRun := range []bool{true, false} {
				dir := t.TempDir()
				for rel, data := range tc.existing {
					writeFile(t, dir, rel, data)
				}
				before := tree(t, dir)
				req := tc.req
				req.DryRun = dryRun
				res, err := Delete(t.Context(), dir, scan(t, dir), req)
				if err != nil {
					t.Fatalf("Delete: %v", err)
				}
				if len(res.Errors) > 0 {
					t.Fatalf("Delete errors: %+v", res.Errors)
				}
				if got := actions(res.Outcomes); !slices.Equal(got, tc.want) || res.DryRun != dryRun {
					t.Errorf("Delete (dry run %v) = %q, want %q", dryRun, got, tc.want)
				}
				if tc.reason != "" && !strings.Contains(res.Outcomes[0].Reason, tc.reason) {
					t.Errorf("reason = %q, want it to contain %q", res.Outcomes[0].Reason, tc.reason)
				}
				want := tc.after
				if dryRun {
					want = before
				}
				if got := tree(t, dir); !slices.Equal(got, want) {
					t.Errorf("config dir after Delete (dry run %v) = %q, want %q", dryRun, got, want)
				}
			}
		})
	}
}

func TestDeleteRefusesBadRequests(t *testing.T) {
	tests := []struct {
		name string
		req  localapi.DeleteRequest
		want string
	}{
		{name: "agent", req: localapi.DeleteRequest{Kind: "Agent", Name: "marshal-coder-x.scope"}, want: "agents are not declared"},
		{name: "unknown_kind", req: localapi.DeleteRequest{Kind: "Pod", Name: "x"}, want: `unknown kind "Pod"`},
		{name: "bad_name", req: localapi.DeleteRequest{Kind: "Profile", Name: "../x"}, want: `invalid name "../x"`},
		{name: "nothing", req: localapi.DeleteRequest{}, want: "nothing to delete"},
		{name: "both", req: localapi.DeleteRequest{Kind: "Profile", Name: "x", Files: []localapi.ApplyFile{file("a.yaml", coder)}}, want: "or files, not more"},
		{name: "name_and_selector", req: localapi.DeleteRequest{Kind: "Profile", Name: "x", Selector: "a=b"}, want: "not both"},
		{name: "bad_selector", req: localapi.DeleteRequest{Kind: "Profile", Selector: "a in b"}, want: `label selector "a in b"`},
		{name: "invalid_file", req: localapi.DeleteRequest{Files: []localapi.ApplyFile{file("a.yaml", "kind: [\n")}}, want: "syntax error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "applied/profile-coder.yaml", coder)
			res, err := Delete(t.Context(), dir, scan(t, dir), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, tc.want) {
				t.Errorf("Delete(%+v) errors = %+v, want one containing %q", tc.req, res.Errors, tc.want)
			}
			if got := tree(t, dir); !slices.Equal(got, []string{"applied/profile-coder.yaml"}) {
				t.Errorf("a refused Delete changed the config dir: %q", got)
			}
		})
	}
}

// TestApplyThenDeleteBeforeTheSourceCatchesUp deletes with declarations
// scanned before the apply: the applied file on disk is found anyway.
func TestApplyThenDeleteBeforeTheSourceCatchesUp(t *testing.T) {
	dir := t.TempDir()
	stale := scan(t, dir)
	if _, err := Apply(t.Context(), dir, stale, localapi.ApplyRequest{Files: []localapi.ApplyFile{file("a.yaml", coder)}}); err != nil {
		t.Fatal(err)
	}
	res, err := Delete(t.Context(), dir, stale, localapi.DeleteRequest{Kind: "Profile", Name: "coder"})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res.Outcomes); !slices.Equal(got, []string{"Profile/coder deleted"}) {
		t.Errorf("Delete = %q, want deleted", got)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Errorf("config dir after Delete = %q, want empty", got)
	}
}

// TestDeleteTwiceBeforeTheSourceCatchesUp deletes an object a second
// time with declarations scanned before the first: the file on disk is
// gone, so the object is not found, not deleted again.
func TestDeleteTwiceBeforeTheSourceCatchesUp(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "applied/profile-coder.yaml", coder)
	stale := scan(t, dir)
	req := localapi.DeleteRequest{Kind: "Profile", Name: "coder"}
	for _, want := range []string{"Profile/coder deleted", "Profile/coder not_found"} {
		res, err := Delete(t.Context(), dir, stale, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := actions(res.Outcomes); !slices.Equal(got, []string{want}) {
			t.Errorf("Delete = %q, want %q", got, want)
		}
	}
}

// TestApplyTakesWhatGetPrints applies an object as marshalctl get -o yaml
// prints it, status and all: the file written holds none of it.
func TestApplyTakesWhatGetPrints(t *testing.T) {
	dir := t.TempDir()
	got := strings.Replace(writer, "{name: writer}", `{name: writer, generation: 4, creationTimestamp: "2025-03-01T11:00:00Z"}`, 1) +
		"status: {agents: 1, slice: marshal-writer.slice}\n"
	res := apply(t, dir, false, file("got.yaml", got))
	if len(res.Errors) > 0 || !slices.Equal(actions(res.Outcomes), []string{"Profile/writer created"}) {
		t.Fatalf("Apply = %+v %+v, want created", res.Outcomes, res.Errors)
	}
	f := loader.LoadFile(filepath.Join(dir, "applied/profile-writer.yaml"))
	if len(f.Errors) > 0 {
		t.Errorf("the applied file does not load strictly: %s", errorsOf(f))
	}
}

func TestSnapshot(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", coder+"---\n"+writer)
	writeFile(t, dir, "b/c.yaml", coderMoreCPU) // loses the conflict to a.yaml
	writeFile(t, dir, "bad.yaml", "kind: [\n")
	s := scan(t, dir)
	if file, obj, ok := s.Lookup(reconcile.Key{Kind: "Profile", Name: "coder"}); !ok || file != "a.yaml" ||
		*obj.(*v1alpha1.Profile).Spec.Limits.CPUMilli != 2000 {
		t.Errorf("Lookup(Profile/coder) = %q, %v, %v; want a.yaml's", file, obj, ok)
	}
	if got := s.KeysIn("b/c.yaml"); !slices.Equal(got, []reconcile.Key{{Kind: "Profile", Name: "coder"}}) {
		t.Errorf("KeysIn(b/c.yaml) = %v", got)
	}
	if got := s.KeysIn("bad.yaml"); len(got) != 0 {
		t.Errorf("KeysIn(bad.yaml) = %v, want none", got)
	}
	want := []reconcile.Key{{Kind: "Profile", Name: "coder"}, {Kind: "Profile", Name: "writer"}}
	if got := s.Keys("Profile"); !slices.Equal(got, want) {
		t.Errorf("Keys(Profile) = %v, want %v", got, want)
	}
	if _, _, ok := s.Lookup(reconcile.Key{Kind: "Host", Name: "local"}); ok {
		t.Errorf("Lookup(Host/local) found an undeclared object")
	}
}

// A symlink that leaves the config dir is never followed to write,
// remove or read: apply and delete refuse, and nothing outside changes.
func TestApplyAndDeleteNeverLeaveTheConfigDir(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "applied/profile-coder.yaml", coder)
	// The daemon still declares coder from applied/ (its last good
	// version) when applied/ is swapped for a symlink out.
	decl := scan(t, dir)
	if err := os.RemoveAll(filepath.Join(dir, AppliedDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, AppliedDir)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, outside, "profile-coder.yaml", coder)

	_, err := Apply(t.Context(), dir, decl, localapi.ApplyRequest{Files: []localapi.ApplyFile{file("w.yaml", writer)}})
	if !errors.Is(err, ErrOutsideDir) || !strings.Contains(err.Error(), "applied/profile-writer.yaml resolves outside the config dir") {
		t.Fatalf("Apply through a symlink out = %v, want %v naming the file", err, ErrOutsideDir)
	}
	_, err = Apply(t.Context(), dir, decl, localapi.ApplyRequest{Files: []localapi.ApplyFile{file("c.yaml", coderMoreCPU)}})
	if !errors.Is(err, ErrOutsideDir) {
		t.Fatalf("Apply of a change through a symlink out = %v, want %v", err, ErrOutsideDir)
	}
	_, err = Delete(t.Context(), dir, decl, localapi.DeleteRequest{Kind: "Profile", Name: "coder"})
	if !errors.Is(err, ErrOutsideDir) {
		t.Fatalf("Delete through a symlink out = %v, want %v", err, ErrOutsideDir)
	}
	if got := tree(t, outside); !slices.Equal(got, []string{"profile-coder.yaml"}) {
		t.Fatalf("outside the config dir: %v, want only what was there", got)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "profile-coder.yaml")); string(data) != coder {
		t.Fatalf("the file outside was changed:\n%s", data)
	}

	// A symlink that stays inside is followed, as the loader follows it.
	os.Remove(filepath.Join(dir, AppliedDir))
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, AppliedDir)); err != nil {
		t.Fatal(err)
	}
	if res := apply(t, dir, false, file("w.yaml", writer)); !slices.Equal(actions(res.Outcomes), []string{"Profile/writer created"}) {
		t.Fatalf("Apply through a symlink inside = %v", actions(res.Outcomes))
	}
	if _, err := os.Stat(filepath.Join(dir, "real", "profile-writer.yaml")); err != nil {
		t.Fatalf("Apply through a symlink inside did not write there: %v", err)
	}
}
