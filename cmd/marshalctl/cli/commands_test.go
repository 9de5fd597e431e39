package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

const (
	sharedProfiles = `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder}
spec: {}
---
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: writer}
spec: {}
`
	docsWorkspace = `apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: docs}
spec: {root: /srv/docs, profile: writer}
`
)

// TestGolden runs commands against the fixture, or against a config dir
// a setup prepares, and compares what they print and their exit code
// with testdata/<name>.golden.
func TestGolden(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		setup func(t *testing.T, h *harness)
	}{
		// get
		{name: "get_profiles", args: []string{"get", "profiles"}},
		{name: "get_profiles_wide", args: []string{"get", "prof", "-o", "wide"}},
		{name: "get_profile_by_name", args: []string{"get", "profile", "coder"}},
		{name: "get_profile_yaml", args: []string{"get", "pr", "coder", "-o", "yaml"}},
		{name: "get_profile_json", args: []string{"get", "pr", "writer", "-o", "json"}},
		{name: "get_workspaces", args: []string{"get", "workspaces"}},
		{name: "get_workspaces_wide", args: []string{"get", "ws", "-o", "wide"}},
		{name: "get_workspaces_ready_only", args: []string{"get", "ws", "webapp"}},
		{name: "get_workspaces_yaml_list", args: []string{"get", "ws", "-o", "yaml"}},
		{name: "get_hosts", args: []string{"get", "hosts"}},
		{name: "get_hosts_wide", args: []string{"get", "host", "-o", "wide"}},
		{name: "get_agents", args: []string{"get", "agents"}},
		{name: "get_agents_wide", args: []string{"get", "ag", "-o", "wide"}},
		{name: "get_agents_json_list", args: []string{"get", "agents", "-o", "json"}},
		{name: "get_none", args: []string{"get", "profiles"}, setup: func(t *testing.T, h *harness) {
			h.d.Remove("Profile", "coder")
			h.d.Remove("Profile", "writer")
		}},
		{name: "get_missing", args: []string{"get", "workspace", "nope"}},
		{name: "get_unknown_kind", args: []string{"get", "pods"}},
		{name: "get_bad_output", args: []string{"get", "profiles", "-o", "table"}},
		{name: "get_several_names", args: []string{"get", "profiles", "coder", "nope"}},
		{name: "get_several_kinds", args: []string{"get", "profiles,ws"}},
		{name: "get_all", args: []string{"get", "all"}},
		{name: "get_all_wide", args: []string{"get", "all", "-o", "wide"}},
		{name: "get_by_kind_and_name", args: []string{"get", "profile/coder", "ws/docs", "-o", "name"}},
		{name: "get_names_need_one_kind", args: []string{"get", "profiles,ws", "coder"}},
		{name: "get_mixed_name_forms", args: []string{"get", "profile/coder", "docs"}},
		{name: "get_selector_equality", args: []string{"get", "profiles", "-l", "team=platform"}},
		{name: "get_selector_set", args: []string{"get", "profiles", "--selector", "tier in (gold,silver),!retired"}},
		{name: "get_selector_not_in", args: []string{"get", "profiles", "-l", "tier notin (gold)"}},
		{name: "get_selector_matches_none", args: []string{"get", "profiles,workspaces", "-l", "team=web"}},
		{name: "get_selector_invalid", args: []string{"get", "profiles", "-l", "tier in gold"}},
		{name: "get_selector_and_names", args: []string{"get", "profiles", "coder", "-l", "team"}},
		{name: "get_selector_yaml", args: []string{"get", "profiles", "-l", "team", "-o", "yaml"}},
		{name: "get_output_name", args: []string{"get", "all", "-o", "name"}},
		{name: "get_jsonpath_list", args: []string{"get", "ws", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.spec.root}{\"\\n\"}{end}"}},
		{name: "get_jsonpath_object", args: []string{"get", "pr", "coder", "-o", "jsonpath={.spec.limits.memory_bytes} {.status.conditions[?(@.type==\"Ready\")].status}"}},
		{name: "get_jsonpath_invalid", args: []string{"get", "pr", "-o", "jsonpath={.items[}"}},
		{name: "get_jsonpath_needs_a_template", args: []string{"get", "pr", "-o", "jsonpath"}},
		{name: "get_custom_columns", args: []string{"get", "profiles,ws", "-o",
			"custom-columns=NAME:.metadata.name,KIND:kind,READY:{.status.conditions[?(@.type==\"Ready\")].status},TEAM:.metadata.labels.team"}},
		{name: "get_custom_columns_invalid", args: []string{"get", "ws", "-o", "custom-columns=NAME"}},
		{name: "get_warns_about_the_config_dir", args: []string{"get", "profiles"}, setup: func(t *testing.T, h *harness) {
			h.d.SetInfo(localapi.Info{Source: localapi.SourceStatus{
				Dir: "/etc/marshal/manifests.d",
				Errors: []localapi.ManifestError{
					{File: "profiles.yaml", Line: 31, Kind: "Profile", Name: "writer", Field: "spec.limitz", Message: "unknown field"},
					{File: "profiles.yaml", Line: 40, Message: "syntax error: x"},
					{File: "ws.yaml", Line: 2, Message: "syntax error: y"},
				},
				Held: true, HeldObjects: 5,
			}})
		}},
		{name: "get_warns_about_a_missing_config_dir", args: []string{"get", "hosts"}, setup: func(t *testing.T, h *harness) {
			h.d.SetInfo(localapi.Info{Source: localapi.SourceStatus{
				Dir:    "/etc/marshal/manifests.d",
				Errors: []localapi.ManifestError{{File: "host.yaml", Line: 6, Kind: "Host", Name: "local", Field: "spec.capacity.cpu_milli", Message: "must be a positive integer, got -1"}},
				Held:   true, Missing: true, HeldObjects: 5,
			}})
		}},

		// describe
		{name: "describe_profile", args: []string{"describe", "profile", "coder"}},
		{name: "describe_invalid_profile", args: []string{"describe", "profile", "writer"}},
		{name: "describe_workspace", args: []string{"describe", "ws", "docs"}},
		{name: "describe_host", args: []string{"describe", "host", "local"}},
		{name: "describe_agent", args: []string{"describe", "agent", "marshal-coder-" + agentID + ".scope"}},
		{name: "describe_missing", args: []string{"describe", "profile", "nope"}},
		{name: "describe_needs_a_kind", args: []string{"describe"}},
		{name: "describe_every_host", args: []string{"describe", "host"}},
		{name: "describe_every_workspace", args: []string{"describe", "workspaces"}},
		{name: "describe_by_kind_and_name", args: []string{"describe", "ws/webapp", "profile/writer"}},
		{name: "describe_selector", args: []string{"describe", "profiles", "-l", "tier=gold"}},
		{name: "describe_selector_matches_none", args: []string{"describe", "profiles", "-l", "tier=tin"}},

		// events
		{name: "events", args: []string{"events"}},
		{name: "events_for_object", args: []string{"events", "--for", "profile/coder"}},
		{name: "events_for_nothing", args: []string{"events", "--for", "ws/webapp"}},
		{name: "events_for_malformed", args: []string{"events", "--for", "coder"}},

		// doctor
		{name: "doctor_failing", args: []string{"doctor"}, setup: func(t *testing.T, h *harness) {
			hybridRoot(t)
			h.doctorDirs(t)
			h.d.SetDoctor(localapi.Doctor{
				Backend:     "cgroupfs",
				Enforcement: fixture()[4].(*v1alpha1.Host).Status.Enforcement,
				Checks: []localapi.Check{
					{Name: "cgroup v2", OK: true, Detail: "mounted at /sys/fs/cgroup/unified (hybrid)"},
					{Name: "systemd", OK: false, Detail: "user manager not reachable", Fix: "run: loginctl enable-linger $USER"},
					{Name: "kernel enforcement: pids", OK: false, Detail: "pids.max not available in cgroup2 or v1"},
				},
			})
		}},
		{name: "doctor_ok", args: []string{"doctor"}, setup: func(t *testing.T, h *harness) {
			fakeHost(t, 0, unifiedMountinfo, "0::/init.scope", "sys/fs/cgroup", "cpuset cpu io memory pids", true)
			h.doctorDirs(t)
			h.d.SetDoctor(localapi.Doctor{Backend: "systemd", Checks: []localapi.Check{{Name: "cgroup v2", OK: true, Detail: "unified at /sys/fs/cgroup"}}})
		}},
		{name: "doctor_user_mode", args: []string{"doctor"}, setup: func(t *testing.T, h *harness) {
			fakeHost(t, 1000, unifiedMountinfo, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/shell.scope",
				"sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service", "cpu memory", true)
			h.doctorDirs(t)
			h.d.SetDoctor(localapi.Doctor{Backend: "systemd"})
		}},
		{name: "doctor_no_cgroup2", args: []string{"doctor"}, setup: func(t *testing.T, h *harness) {
			fakeHost(t, 0, "", "", "sys", "", false)
			h.doctorDirs(t)
		}},
		// apply
		{name: "apply_created", args: []string{"apply", "-f", "testdata/manifests/coder.yaml", "-f", "testdata/manifests/team"}},
		{name: "apply_dry_run", args: []string{"apply", "-f", "testdata/manifests/coder.yaml", "--dry-run"}},
		{name: "apply_unchanged_and_configured", args: []string{"apply", "-f", "testdata/manifests/coder-more-cpu.yaml", "-f", "testdata/manifests/team"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/coder.yaml", "testdata/manifests/team/writer.yaml")
			}},
		{name: "apply_refused", args: []string{"apply", "-f", "testdata/manifests/coder.yaml", "-f", "testdata/manifests/team"},
			setup: func(t *testing.T, h *harness) { h.writeConfig(t, "profiles.yaml", sharedProfiles) }},
		{name: "apply_invalid", args: []string{"apply", "-f", "testdata/manifests/bad.yaml", "-f", "testdata/manifests/team"}},
		{name: "apply_conflicting_files", args: []string{"apply", "-f", "testdata/manifests/coder.yaml", "-f", "testdata/manifests/coder-more-cpu.yaml"}},
		{name: "apply_stdin", args: []string{"apply", "-f", "-"}, stdin: docsWorkspace},
		{name: "apply_missing_file", args: []string{"apply", "-f", "testdata/manifests/nope.yaml"}},
		{name: "apply_needs_files", args: []string{"apply"}},
		{name: "apply_allow_empty", args: []string{"apply", "--allow-empty"}, setup: func(t *testing.T, h *harness) { h.d.Hold() }},
		{name: "apply_allow_empty_not_held", args: []string{"apply", "--allow-empty"}},
		{name: "apply_with_allow_empty", args: []string{"apply", "-f", "-", "--allow-empty"}, stdin: docsWorkspace,
			setup: func(t *testing.T, h *harness) { h.d.Hold() }},

		// diff
		{name: "diff_same", args: []string{"diff", "-f", "testdata/manifests/coder.yaml"},
			setup: func(t *testing.T, h *harness) { h.applyNow(t, "testdata/manifests/coder.yaml") }},
		{name: "diff_changed_and_new", args: []string{"diff", "-f", "testdata/manifests/coder-more-cpu.yaml", "-f", "testdata/manifests/team"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/coder.yaml", "testdata/manifests/team/writer.yaml")
			}},
		{name: "diff_invalid", args: []string{"diff", "-f", "testdata/manifests/bad.yaml"}},
		{name: "diff_needs_files", args: []string{"diff"}},

		// delete
		{name: "delete_by_name", args: []string{"delete", "profile", "coder"},
			setup: func(t *testing.T, h *harness) { h.applyNow(t, "testdata/manifests/coder.yaml") }},
		{name: "delete_dry_run", args: []string{"delete", "profile", "coder", "--dry-run"},
			setup: func(t *testing.T, h *harness) { h.applyNow(t, "testdata/manifests/coder.yaml") }},
		{name: "delete_missing", args: []string{"delete", "ws", "nope"}},
		{name: "delete_refused", args: []string{"delete", "profile", "writer"},
			setup: func(t *testing.T, h *harness) { h.writeConfig(t, "profiles.yaml", sharedProfiles) }},
		{name: "delete_files", args: []string{"delete", "-f", "testdata/manifests/team"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/team/webapp.yaml")
				h.writeConfig(t, "writer.yml", sharedProfiles[strings.Index(sharedProfiles, "---\n")+4:])
			}},
		{name: "delete_twice", args: []string{"delete", "profile", "coder"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/coder.yaml")
				if r := h.run(t, "", "delete", "profile", "coder"); r.code != 0 {
					t.Fatalf("first delete: %+v", r)
				}
			}},
		{name: "delete_ignore_not_found", args: []string{"delete", "ws/nope", "profile/coder", "--ignore-not-found"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/coder.yaml", "testdata/manifests/team/writer.yaml")
			}},
		{name: "delete_selector", args: []string{"delete", "profiles", "-l", "team=platform"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/coder.yaml", "testdata/manifests/team/writer.yaml")
			}},
		{name: "delete_selector_matches_none", args: []string{"delete", "profiles", "-l", "team=web"},
			setup: func(t *testing.T, h *harness) { h.applyNow(t, "testdata/manifests/coder.yaml") }},
		{name: "delete_needs_names", args: []string{"delete", "profiles"}},
		{name: "delete_the_last_object", args: []string{"delete", "profile", "coder"},
			setup: func(t *testing.T, h *harness) {
				h.applyNow(t, "testdata/manifests/coder.yaml")
				h.d.SetInfo(localapi.Info{Source: localapi.SourceStatus{Dir: "/etc/marshal/manifests.d", Files: 1, Objects: 1}})
			}},
		{name: "delete_agent", args: []string{"delete", "agent", "marshal-coder-" + agentID + ".scope"}},
		// stop, kill
		{name: "stop_agent", args: []string{"stop", "agent", "marshal-coder-" + agentID + ".scope"}},
		{name: "stop_agent_no_wait", args: []string{"stop", "agent/marshal-coder-" + agentID + ".scope", "--grace", "1m", "--wait=false"}},
		{name: "kill_agent", args: []string{"kill", "agent", "marshal-coder-" + agentID + ".scope"}},
		{name: "stop_agent_as_shown", args: []string{"stop", "agent", "marshal-coder-3f9a0c1e….scope"}},
		{name: "stop_agent_by_id_prefix", args: []string{"stop", "agent/3f9a0c1e", "--wait=false"}},
		{name: "kill_agent_by_scope_prefix", args: []string{"kill", "agent", "marshal-writer-0000"}},
		{name: "stop_agent_ambiguous", args: []string{"stop", "agent", "marshal-"}},
		{name: "stop_agent_no_match", args: []string{"stop", "agent", "ffff"}},
		{name: "stop_missing", args: []string{"stop", "agent", "marshal-coder-00000000000000000000000000000009.scope"}},
		{name: "stop_not_an_agent", args: []string{"stop", "profile", "coder"}},
		{name: "stop_bad_grace", args: []string{"stop", "agent", "x", "--grace", "0s"}},

		// wait
		{name: "wait_condition_met", args: []string{"wait", "--for=condition=Ready", "workspace/webapp", "profile/coder"}},
		{name: "wait_condition_value", args: []string{"wait", "--for", "condition=ready=false", "ws", "docs"}},
		{name: "wait_selector", args: []string{"wait", "--for=condition=Ready", "profiles", "-l", "team"}},
		{name: "wait_delete_of_nothing", args: []string{"wait", "--for=delete", "ws/nope"}},
		{name: "wait_condition_of_nothing", args: []string{"wait", "--for=condition=Ready", "ws/nope"}},
		{name: "wait_timeout", args: []string{"wait", "--for=condition=Ready", "ws/docs", "--timeout=1ms"}},
		{name: "wait_bad_for", args: []string{"wait", "--for=ready", "ws/docs"}},
		{name: "wait_needs_objects", args: []string{"wait", "--for=delete", "ws"}},
		{name: "delete_name_and_files", args: []string{"delete", "profile", "coder", "-f", "testdata/manifests/coder.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup == nil || strings.HasPrefix(tc.name, "get_") || strings.HasPrefix(tc.name, "doctor") || strings.HasPrefix(tc.name, "wait_") || strings.HasPrefix(tc.name, "stop_") {
				h.withFixture()
			}
			if tc.setup != nil {
				tc.setup(t, h)
			}
			r := h.run(t, tc.stdin, tc.args...)
			golden(t, tc.name, r.transcript(tc.args, h.config, "$CONFIG", h.socket, "$SOCKET"))
		})
	}
}

// TestDoctorWithoutMarshald: the local checks run, and marshald not
// answering is one failed check.
func TestDoctorWithoutMarshald(t *testing.T) {
	root := fakeHost(t, 1000, hybridMountinfo, "0::/user.slice/user-1000.slice/session-2.scope", "sys/fs/cgroup/unified", "hugetlb", false)
	// systemd is PID 1, but this user's manager is not running.
	if err := os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "none.sock")
	r := runCLI(t, "--socket", socket, "doctor")
	golden(t, "doctor_without_marshald", r.transcript([]string{"doctor"}, socket, "$SOCKET", root, "$ROOT"))
}

// Doctor's host checks need no daemon and no socket: for a user without
// XDG_RUNTIME_DIR on a host whose PID 1 is not systemd they run, and say
// what works there; --config-dir and --state-dir name the dirs to check.
func TestDoctorBeforeMarshaldEverRan(t *testing.T) {
	root := fakeHost(t, 1000, unifiedMountinfo, "0::/", "sys/fs/cgroup", "cpu memory pids", false)
	env := map[string]string{"HOME": filepath.Join(root, "home/dev")}
	localHost.getenv = func(k string) string { return env[k] }
	config := filepath.Join(root, "agents/manifests.d")
	if err := os.MkdirAll(config, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"doctor", "--config-dir", config, "--state-dir", filepath.Join(root, "agents/state")}
	r := runCLI(t, args...)
	golden(t, "doctor_before_marshald_ran", r.transcript(args, root, "$ROOT"))
}

// TestApplyThenGetThenDelete drives a whole round through the CLI: what
// apply writes is what the loader loads and what get then shows, and
// delete removes it.
func TestApplyThenGetThenDelete(t *testing.T) {
	h := newHarness(t)
	if r := h.run(t, "", "apply", "-f", "testdata/manifests/coder.yaml", "-f", "testdata/manifests/team"); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	want := []string{"applied/profile-coder.yaml", "applied/profile-writer.yaml", "applied/workspace-webapp.yaml"}
	if got := h.configFiles(t); !slices.Equal(got, want) {
		t.Errorf("config dir after apply = %q, want %q", got, want)
	}
	res, err := loader.LoadDir(t.Context(), h.config)
	if err != nil || len(res.Errors) > 0 || len(res.Objects) != 3 {
		t.Fatalf("loading the config dir after apply: %v %v (%d objects)", err, res.Errors, len(res.Objects))
	}
	if r := h.run(t, "", "get", "profiles", "-o", "wide"); r.code != 0 || !strings.Contains(r.stdout, "cpu=2,memory=4GiB,tasks=1024") {
		t.Errorf("get after apply: %+v", r)
	}
	if r := h.run(t, "", "diff", "-f", "testdata/manifests/coder.yaml", "-f", "testdata/manifests/team"); r.code != 0 || r.stdout != "" {
		t.Errorf("diff right after apply: %+v, want no difference", r)
	}
	if r := h.run(t, "", "delete", "-f", "testdata/manifests/team"); r.code != 0 {
		t.Errorf("delete: %+v", r)
	}
	if got := h.configFiles(t); !slices.Equal(got, want[:1]) {
		t.Errorf("config dir after delete = %q, want %q", got, want[:1])
	}
	if r := h.run(t, "", "get", "ws", "webapp"); r.code != ExitNo {
		t.Errorf("get of a deleted workspace: %+v, want exit 1", r)
	}
}

func TestApplyInvalidSendsNothing(t *testing.T) {
	h := newHarness(t)
	r := h.run(t, "", "apply", "-f", "testdata/manifests/bad.yaml")
	if r.code != ExitNo {
		t.Errorf("apply of an invalid manifest exited %d, want 1", r.code)
	}
	if got := h.d.Applied(); len(got) != 0 {
		t.Errorf("marshald received %d apply requests, want none", len(got))
	}
	if got := h.configFiles(t); len(got) != 0 {
		t.Errorf("config dir = %q, want empty", got)
	}
}

func TestApplyDirectorySendsWhatTheLoaderCounts(t *testing.T) {
	h := newHarness(t)
	if r := h.run(t, "", "apply", "-f", "testdata/manifests/team", "--dry-run"); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	reqs := h.d.Applied()
	if len(reqs) != 1 {
		t.Fatalf("marshald received %d requests, want 1", len(reqs))
	}
	var names []string
	for _, f := range reqs[0].Files {
		names = append(names, f.Name)
		data, _ := os.ReadFile(f.Name)
		if !bytes.Equal(data, f.Data) {
			t.Errorf("%s was sent as %q, want its content", f.Name, f.Data)
		}
	}
	want := []string{filepath.Join("testdata/manifests/team", "webapp.yaml"), filepath.Join("testdata/manifests/team", "writer.yaml")}
	if !slices.Equal(names, want) || !reqs[0].DryRun {
		t.Errorf("sent %q (dry run %v), want %q as a dry run; dotfiles are not manifests", names, reqs[0].DryRun, want)
	}
}

func TestUnreachableDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{{"get", "profiles"}, {"describe", "ws", "x"}, {"events"}, {"apply", "--allow-empty"}, {"delete", "profile", "x"}} {
		var out, errOut bytes.Buffer
		err := Run(t.Context(), append([]string{"--socket", socket}, args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
		want := "marshalctl: marshald is not running at " + socket + " (no such file or directory); start it with `marshald`"
		if ExitCode(err) != ExitFailure || !strings.HasPrefix(errOut.String(), want) {
			t.Errorf("%v without a daemon: exit %d, %q; want exit 3 and %q", args, ExitCode(err), errOut.String(), want)
		}
	}
}

func TestSocketFromEnvironment(t *testing.T) {
	h := newHarness(t).withFixture()
	t.Setenv("MARSHAL_SOCKET", h.socket)
	var out, errOut bytes.Buffer
	err := Run(t.Context(), []string{"get", "hosts"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if err != nil || !strings.Contains(out.String(), "local") {
		t.Errorf("get with MARSHAL_SOCKET: %v, %q %q", err, out.String(), errOut.String())
	}
}

func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	for _, name := range []string{"get", "describe", "events", "apply", "diff", "delete", "doctor", "identify", "validate"} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Run(t.Context(), []string{name, "--help"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			if err != nil || !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "Usage:") {
				t.Errorf("%s --help: %v\n%s", name, err, out.String())
			}
			if !strings.Contains(out.String(), "Exit status:") {
				t.Errorf("%s --help does not state its exit status", name)
			}
		})
	}
}

// validate --help points to the manifest reference rather than printing
// it, and validate --reference prints it whole.
func TestValidateHelpPointsToTheReference(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := Run(t.Context(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
		return out.String(), err
	}
	help, err := run("validate", "--help")
	if err != nil || !strings.Contains(help, "validate --reference") || strings.Contains(help, "#### Profile") {
		t.Errorf("validate --help: %v; want a pointer to --reference and not the reference:\n%s", err, help)
	}
	ref, err := run("validate", "--reference")
	if err != nil || ref != v1alpha1.Reference {
		t.Errorf("validate --reference: %v; printed %d bytes, want the reference's %d", err, len(ref), len(v1alpha1.Reference))
	}
	if _, err := run("validate", "--reference", "manifests/"); ExitCode(err) != ExitUsage {
		t.Errorf("validate --reference PATH: exit %d, want %d", ExitCode(err), ExitUsage)
	}
}

// A flag's default is said once: cobra's "(default …)" and no second one.
func TestFlagDefaultsAreSaidOnce(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), []string{"egress", "log", "--help"}, Streams{In: strings.NewReader(""), Out: &out, Err: &out}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Count(line, "default") > 1 {
			t.Errorf("egress log --help says a default twice: %q", line)
		}
	}
}

func TestWatchObjects(t *testing.T) {
	h := newHarness(t).withFixture()
	out, stop := h.background(t, "get", "profiles", "-w")
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "writer") }, "the first table")

	coder := fixture()[0].(*v1alpha1.Profile)
	coder.Status.Agents = 5
	h.d.Set(coder)
	testutil.Eventually(t, out.wrote, func() bool { return strings.Count(out.String(), "coder") == 2 }, "coder's new row")
	h.d.Remove("Profile", "writer")
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "(deleted)") }, "writer's deletion")

	r := stop()
	if r.code != 0 {
		t.Errorf("get -w interrupted: exit %d, %q", r.code, r.stderr)
	}
	golden(t, "get_profiles_watch", r.stdout)
}

// An object deleted while get -w starts its watch is never left on
// screen as if it were there.
func TestWatchMissesNoDeletionAtItsStart(t *testing.T) {
	h := newHarness(t).withFixture()
	h.d.BeforeWatch(func() { h.d.Remove("Profile", "writer") })
	out, stop := h.background(t, "get", "profiles", "-w")
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "coder") }, "the first table")
	// A change after the start, seen: the watch has caught up with
	// everything before it.
	coder := fixture()[0].(*v1alpha1.Profile)
	coder.Status.Agents = 5
	h.d.Set(coder)
	testutil.Eventually(t, out.wrote, func() bool { return strings.Count(out.String(), "coder") == 2 }, "coder's new row")
	r := stop()
	for line := range strings.Lines(r.stdout) {
		if strings.HasPrefix(line, "writer") && !strings.Contains(line, "(deleted)") {
			if !strings.Contains(r.stdout, "(deleted)") {
				t.Errorf("writer, deleted as the watch started, is shown and never deleted:\n%s", r.stdout)
			}
		}
	}
}

func TestWatchOneObjectAsYAML(t *testing.T) {
	h := newHarness(t).withFixture()
	out, stop := h.background(t, "get", "ws", "docs", "-w", "-o", "yaml")
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "RootMissing") }, "docs as YAML")

	docs := fixture()[3].(*v1alpha1.Workspace)
	docs.Status.Conditions[0] = v1alpha1.Condition{Type: "Ready", Status: "True", Reason: "RootFound", LastTransitionTime: now}
	h.d.Set(docs)
	webapp := fixture()[2].(*v1alpha1.Workspace)
	webapp.Status.Live = 3 // not watched: not printed
	h.d.Set(webapp)
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "RootFound") }, "docs' change")

	r := stop()
	if r.code != 0 || strings.Count(r.stdout, "---\n") != 1 || strings.Contains(r.stdout, "webapp") {
		t.Errorf("get ws docs -w -o yaml = exit %d:\n%s", r.code, r.stdout)
	}
}

func TestWatchEvents(t *testing.T) {
	h := newHarness(t).withFixture()
	out, stop := h.background(t, "events", "-w", "--for", "ws/docs")
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "RootMissing") }, "the first events")
	h.d.Record(v1alpha1.Event{Type: v1alpha1.EventNormal, Object: v1alpha1.ObjectReference{Kind: "Workspace", Name: "docs"},
		Reason: "RootFound", Message: "root /home/dev/src/docs exists", Count: 1, FirstSeen: now, LastSeen: now})
	h.d.Record(v1alpha1.Event{Type: v1alpha1.EventNormal, Object: v1alpha1.ObjectReference{Kind: "Profile", Name: "coder"},
		Reason: "Other", Message: "not about docs", Count: 1, FirstSeen: now, LastSeen: now})
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "RootFound") }, "the new event")
	r := stop()
	if r.code != 0 {
		t.Errorf("events -w interrupted: exit %d, %q", r.code, r.stderr)
	}
	golden(t, "events_watch", r.stdout)
}

// TestGetOutputAppliesBack pipes what get prints, status and all, into
// apply: as YAML, as JSON, one object and lists of several kinds.
func TestGetOutputAppliesBack(t *testing.T) {
	for _, args := range [][]string{
		{"get", "profiles,workspaces", "-o", "yaml"},
		{"get", "profiles,workspaces,hosts", "-o", "json"},
		{"get", "profile", "coder", "-o", "yaml"},
	} {
		t.Run(strings.Join(args[1:], "_"), func(t *testing.T) {
			h := newHarness(t).withFixture()
			got := h.run(t, "", args...)
			if got.code != 0 {
				t.Fatalf("%v: %+v", args, got)
			}
			if !strings.Contains(got.stdout, "status") || !strings.Contains(got.stdout, "generation") {
				t.Fatalf("%v printed no status and generation; the test needs them:\n%s", args, got.stdout)
			}
			applied := h.run(t, got.stdout, "apply", "-f", "-")
			if applied.code != 0 {
				t.Fatalf("apply of what %v printed: %+v", args, applied)
			}
			res, err := loader.LoadDir(t.Context(), h.config)
			if err != nil || len(res.Errors) > 0 || len(res.Objects) == 0 {
				t.Fatalf("the config dir after apply does not load strictly: %v %v", err, res.Errors)
			}
			if diff := h.run(t, got.stdout, "diff", "-f", "-"); diff.code != 0 || diff.stdout != "" {
				t.Errorf("diff of what %v printed, right after applying it: %+v, want none", args, diff)
			}
		})
	}
}

// TestDeleteWaitsUntilGone deletes while marshald lags the config dir,
// as its manifest source does: delete returns only once marshald no
// longer has the object, unless --wait=false.
func TestDeleteWaitsUntilGone(t *testing.T) {
	h := newHarness(t)
	h.applyNow(t, "testdata/manifests/coder.yaml", "testdata/manifests/team/writer.yaml")
	h.d.Lag()

	if r := h.run(t, "", "delete", "profile", "writer", "--wait=false"); r.code != 0 {
		t.Fatalf("delete --wait=false: %+v", r)
	}
	if r := h.run(t, "", "get", "profile", "writer"); r.code != 0 {
		t.Fatalf("get right after delete --wait=false: %+v; the test needs marshald to lag", r)
	}

	out, errOut := newSyncBuffer(), newSyncBuffer()
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), []string{"--socket", h.socket, "delete", "profile", "coder"},
			Streams{In: strings.NewReader(""), Out: out, Err: errOut})
	}()
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "profile/coder deleted") }, "delete's outcome")
	select {
	case err := <-done:
		t.Fatalf("delete returned (%v) while marshald still had the object", err)
	default:
	}
	if err := h.d.CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("delete: %v, %q", err, errOut.String())
	}
	if r := h.run(t, "", "get", "profiles"); r.code != 0 || strings.Contains(r.stdout, "coder") || strings.Contains(r.stdout, "writer") {
		t.Errorf("get right after delete: %+v, want neither profile", r)
	}
}

// TestStopWaitsUntilTheAgentIsGone stops and kills agents: the grace
// period is sent as given, and stop returns once marshald no longer lists
// the agent.
func TestStopWaitsUntilTheAgentIsGone(t *testing.T) {
	h := newHarness(t).withFixture()
	h.d.Lag()
	name := "marshal-coder-" + agentID + ".scope"
	out := newSyncBuffer()
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), []string{"--socket", h.socket, "stop", "agent", name, "--grace", "1m30s"},
			Streams{In: strings.NewReader(""), Out: out, Err: io.Discard})
	}()
	testutil.Eventually(t, h.d.StopsChanged(), func() bool { return len(h.d.Stopped()) == 1 }, "the stop request")
	select {
	case err := <-done:
		t.Fatalf("stop returned (%v) while the agent was still listed", err)
	default:
	}
	h.d.Remove(v1alpha1.KindAgent, name)
	if err := <-done; err != nil || out.String() != "agent/"+name+" stopped\n" {
		t.Errorf("stop: %v, %q", err, out.String())
	}
	if got := h.d.Stopped(); got[0] != (localapi.StopRequest{Agent: name, GraceMS: 90000}) {
		t.Errorf("stop sent %+v, want a grace of 90s", got[0])
	}
}

// TestWaitFollowsChanges waits for a condition that a later change
// meets, and for an object that a later change removes.
func TestWaitFollowsChanges(t *testing.T) {
	h := newHarness(t).withFixture()
	wait := func(args ...string) (*syncBuffer, chan error) {
		out := newSyncBuffer()
		done := make(chan error, 1)
		go func() {
			done <- Run(t.Context(), append([]string{"--socket", h.socket, "wait", "--timeout=0"}, args...),
				Streams{In: strings.NewReader(""), Out: out, Err: io.Discard})
		}()
		return out, done
	}
	readyOut, ready := wait("--for=condition=Ready", "ws/docs")
	goneOut, gone := wait("--for=delete", "profile/writer")

	docs := fixture()[3].(*v1alpha1.Workspace)
	docs.Status.Conditions[0] = v1alpha1.Condition{Type: "Ready", Status: "True", Reason: "RootFound", LastTransitionTime: now}
	h.d.Set(docs)
	if err := <-ready; err != nil || readyOut.String() != "workspace/docs condition met\n" {
		t.Errorf("wait for Ready: %v, %q", err, readyOut.String())
	}
	h.d.Remove("Profile", "writer")
	if err := <-gone; err != nil || goneOut.String() != "profile/writer deleted\n" {
		t.Errorf("wait for delete: %v, %q", err, goneOut.String())
	}
}
