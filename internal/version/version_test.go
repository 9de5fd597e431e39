package version

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"
)

const hash = "3f9a0c1e5b7d4e2f8a6c0b1d3e5f7a9c01234567"

func TestGet(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/marshal-dev/marshal", Version: "v0.2.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: hash},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	dirty := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/marshal-dev/marshal", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: hash},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	unstamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/marshal-dev/marshal", Version: "(devel)"},
	}
	tests := []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{name: "linker_wins", version: "v0.3.0", commit: "abc123", bi: stamped,
			want: Info{Version: "v0.3.0", Commit: "abc123", GoVersion: "go1.26.0"}},
		{name: "linker_version_only", version: "v0.3.0", bi: stamped,
			want: Info{Version: "v0.3.0", Commit: hash, GoVersion: "go1.26.0"}},
		{name: "toolchain_stamp", bi: stamped,
			want: Info{Version: "v0.2.0", Commit: hash, GoVersion: "go1.26.0"}},
		{name: "toolchain_dirty_tree", bi: dirty,
			want: Info{Version: UnknownVersion, Commit: hash + "-dirty", GoVersion: "go1.26.0"}},
		{name: "no_stamp", bi: unstamped,
			want: Info{Version: UnknownVersion, Commit: UnknownCommit, GoVersion: "go1.26.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.version, tc.commit, func() (*debug.BuildInfo, bool) { return tc.bi, true })
			if got != tc.want {
				t.Errorf("get(%q, %q) = %+v, want %+v", tc.version, tc.commit, got, tc.want)
			}
		})
	}
	t.Run("no_build_info", func(t *testing.T) {
		got := get("", "", func() (*debug.BuildInfo, bool) { return nil, false })
		if got.Version != UnknownVersion || got.Commit != UnknownCommit || got.GoVersion == "" {
			t.Errorf("get without build info = %+v, want %q, %q and the runtime's Go version", got, UnknownVersion, UnknownCommit)
		}
	})
}

func TestString(t *testing.T) {
	tests := []struct {
		name string
		in   Info
		want string
	}{
		{name: "full_hash", in: Info{Version: "v0.3.0", Commit: hash, GoVersion: "go1.26.0"},
			want: "v0.3.0 (commit 3f9a0c1e5b7d, go1.26.0)"},
		{name: "dirty_hash", in: Info{Version: "dev", Commit: hash + "-dirty", GoVersion: "go1.26.0"},
			want: "dev (commit 3f9a0c1e5b7d-dirty, go1.26.0)"},
		{name: "short_or_unknown", in: Info{Version: "dev", Commit: UnknownCommit, GoVersion: "go1.26.0"},
			want: "dev (commit unknown, go1.26.0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.String(); got != tc.want {
				t.Errorf("%+v.String() = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestLinkerFlags builds a program with the flags the Makefile passes and
// checks that they reach Get: a renamed variable or a constant would
// silently ignore them.
func TestLinkerFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}
	bin := filepath.Join(t.TempDir(), "showversion")
	const pkg = "github.com/marshal-dev/marshal/internal/version"
	build := exec.CommandContext(t.Context(), gobin, "build", "-o", bin,
		"-ldflags", "-X "+pkg+".Version=v9.8.7 -X "+pkg+".Commit="+hash, "./testdata/showversion")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Version != "v9.8.7" || got.Commit != hash || got.GoVersion == "" {
		t.Errorf("built with -X: Get() = %+v, want v9.8.7 and %s", got, hash)
	}
}
