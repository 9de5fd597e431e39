package launch

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func TestApplyEnv(t *testing.T) {
	changes := map[string]string{"B": "new", "Z": "z", "A": "a"}
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"empty", nil, []string{"A=a", "B=new", "Z=z"}},
		{"replaced_in_place", []string{"X=1", "B=old", "Y=2"}, []string{"X=1", "B=new", "Y=2", "A=a", "Z=z"}},
		{"later_duplicates_dropped", []string{"B=1", "B=2"}, []string{"B=new", "A=a", "Z=z"}},
		{"entries_without_equals_kept", []string{"weird", "B"}, []string{"weird", "B", "A=a", "B=new", "Z=z"}},
		{"bytes_kept", []string{"K=\xff\xfe"}, []string{"K=\xff\xfe", "A=a", "B=new", "Z=z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := applyEnv(tc.env, changes); !slices.Equal(got, tc.want) {
				t.Errorf("applyEnv(%q) = %q, want %q", tc.env, got, tc.want)
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	root := t.TempDir()
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{"bin/tool", 0o755}, {"bin/plain", 0o644}, {"other/tool", 0o755}, {"local", 0o755},
	} {
		p := filepath.Join(root, f.path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(root, "bin", "dir"), 0o755)
	tests := []struct {
		name, file, path string
		want             string
	}{
		{"first_on_path", "tool", root + "/bin:" + root + "/other", root + "/bin/tool"},
		{"relative_dir_from_root", "tool", "other", root + "/other/tool"},
		{"empty_element_is_the_root", "local", ":/nowhere", root + "/local"},
		{"not_executable_skipped", "plain", root + "/bin", ""},
		{"directory_skipped", "dir", root + "/bin", ""},
		{"slash_relative_to_root", "./bin/tool", "", root + "/bin/tool"},
		{"slash_absolute", root + "/other/tool", "", root + "/other/tool"},
		{"slash_cleaned", "bin/../other/tool", "", root + "/other/tool"},
		{"no_path", "tool", "", ""},
		{"missing", "nothing", root + "/bin", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := lookPath(tc.file, tc.path, root)
			if !ok {
				got = ""
			}
			if got != tc.want {
				t.Errorf("lookPath(%q, %q) = %q, want %q", tc.file, tc.path, got, tc.want)
			}
		})
	}
}

func TestTimeoutMS(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want uint64
	}{
		{"none", 0, math.MaxUint64},
		{"negative_is_none", -time.Second, math.MaxUint64},
		{"below_a_millisecond_is_one", time.Microsecond, 1},
		{"seconds", 30 * time.Second, 30000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := timeoutMS(tc.d); got != tc.want {
				t.Errorf("timeoutMS(%v) = %d, want %d", tc.d, got, tc.want)
			}
		})
	}
}

// The digest covers what the meaning says the execution is: argv, the
// terminal, the timeout, the workspace's environment changes, the
// executable, the directory and the request; the caller's own
// environment, beyond PATH's choice of executable, is not part of it.
func TestDigestCoversTheMeaning(t *testing.T) {
	root := t.TempDir()
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata.Name = "web"
	w.Spec.Root, w.Spec.Profile = root, "coder"
	w.Spec.Resources = &v1alpha1.ResourcesSpec{Participation: v1alpha1.ParticipationRequired}
	w.Default()
	base := Request{Workspace: "web", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=/a"}}
	digest := func(w *v1alpha1.Workspace, r Request, env map[string]string) string {
		t.Helper()
		x, ref := resolve(w, r, Network{Env: env})
		if ref != nil {
			t.Fatal(ref)
		}
		d, ref := x.digest()
		if ref != nil {
			t.Fatal(ref)
		}
		return d
	}
	d0 := digest(w, base, nil)
	same := base
	same.Env = []string{"PATH=/usr/bin:/bin", "HOME=/b", "OTHER=1"}
	if digest(w, same, nil) != d0 {
		t.Error("the caller's own environment changed the digest")
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.Workspace, *Request)
		env    map[string]string
	}{
		{"profile_env", func(*v1alpha1.Workspace, *Request) {}, map[string]string{"HTTPS_PROXY": "http://127.0.0.1:1"}},
		{"argv", func(_ *v1alpha1.Workspace, r *Request) { r.Argv = []string{"true", "x"} }, nil},
		{"terminal", func(_ *v1alpha1.Workspace, r *Request) { r.TTY = true }, nil},
		{"timeout", func(_ *v1alpha1.Workspace, r *Request) { r.Timeout = time.Second }, nil},
		// /bin/true and /usr/bin/true are one file on a merged /usr, and
		// two executables all the same: the path is what is covered.
		{"executable", func(_ *v1alpha1.Workspace, r *Request) { r.Env = []string{"PATH=/bin:/usr/bin"} }, nil},
		{"exec_env", func(w *v1alpha1.Workspace, _ *Request) { w.Spec.Exec.Env = map[string]string{"K": "v"} }, nil},
		{"network", func(w *v1alpha1.Workspace, _ *Request) { w.Spec.Network.Policy = "other" }, nil},
		{"request", func(w *v1alpha1.Workspace, _ *Request) { *w.Spec.Resources.Request.Tasks = 7 }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w2 := w.DeepCopy()
			r := base
			tc.mutate(w2, &r)
			if digest(w2, r, tc.env) == d0 {
				t.Errorf("changing the %s kept the digest", tc.name)
			}
		})
	}
}

func TestResolveRefusesNonUTF8Argv(t *testing.T) {
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata.Name, w.Spec.Root, w.Spec.Profile = "web", t.TempDir(), "coder"
	w.Default()
	_, ref := resolve(w, Request{Workspace: "web", Argv: []string{"true", "\xff"}, Env: []string{"PATH=/usr/bin"}}, Network{})
	if ref == nil || ref.Code != CodeExecNotAllowed || ref.Detail != detailNotUTF8 {
		t.Fatalf("resolve = %v, want EXEC_NOT_ALLOWED %q", ref, detailNotUTF8)
	}
}

func TestProfileEnvOverridesTheWorkspaces(t *testing.T) {
	w := v1alpha1.New(v1alpha1.KindWorkspace).(*v1alpha1.Workspace)
	w.Metadata.Name, w.Spec.Root, w.Spec.Profile = "web", t.TempDir(), "coder"
	w.Spec.Exec.Env = map[string]string{"HTTPS_PROXY": "http://elsewhere:1", "CI": "1"}
	w.Default()
	env := map[string]string{"HTTPS_PROXY": "http://127.0.0.1:4750", "NO_PROXY": ""}
	x, ref := resolve(w, Request{Workspace: "web", Argv: []string{"true"},
		Env: []string{"PATH=/usr/bin:/bin", "NO_PROXY=localhost", "HTTPS_PROXY=http://caller:1"}}, Network{Env: env})
	if ref != nil {
		t.Fatal(ref)
	}
	got := strings.Join(x.Env, " ")
	want := "PATH=/usr/bin:/bin NO_PROXY= HTTPS_PROXY=http://127.0.0.1:4750 CI=1"
	if !strings.HasPrefix(got, want) {
		t.Errorf("Env = %q, want it to start %q", got, want)
	}
	if x.Changes["HTTPS_PROXY"] != "http://127.0.0.1:4750" || x.Changes["NO_PROXY"] != "" {
		t.Errorf("Changes = %v, want the profile's proxy", x.Changes)
	}
}
