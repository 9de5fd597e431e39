package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-ldflags -X); empty in a plain go build.
var (
	// Version is the module version, such as "v0.3.0".
	Version string
	// Commit is the full hash of the commit built.
	Commit string
)

// What Get reports when neither the linker nor the toolchain says.
const (
	UnknownVersion = "dev"
	UnknownCommit  = "unknown"
)

// Info is a build's identity.
type Info struct {
	// Version is the module version, or UnknownVersion.
	Version string `json:"version"`
	// Commit is the commit hash, with "-dirty" when the toolchain recorded
	// uncommitted changes, or UnknownCommit.
	Commit string `json:"commit"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

// String formats i for people: "v0.3.0 (commit 3f9a0c1e5b7d, go1.26.0)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, shortCommit(i.Commit), i.GoVersion)
}

// Get returns the running binary's identity: Version and Commit when the
// linker set them, else the main module's version and VCS revision that
// the toolchain recorded, else UnknownVersion and UnknownCommit.
func Get() Info {
	return get(Version, Commit, debug.ReadBuildInfo)
}

// get is Get with its inputs passed in, for tests.
func get(version, commit string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		info.GoVersion = bi.GoVersion
		// "(devel)" is what a build from a working tree without VCS
		// stamping records: it says nothing.
		if info.Version == "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			info.Commit = revision(bi.Settings)
		}
	}
	if info.Version == "" {
		info.Version = UnknownVersion
	}
	if info.Commit == "" {
		info.Commit = UnknownCommit
	}
	return info
}

// revision returns the VCS revision the toolchain stamped, marked
// "-dirty" when the tree had uncommitted changes, or "".
func revision(settings []debug.BuildSetting) string {
	var rev string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" && modified {
		rev += "-dirty"
	}
	return rev
}

// shortCommit abbreviates a full hash (SHA-1 or SHA-256, perhaps marked
// "-dirty") to 12 digits; anything else is kept as it is.
func shortCommit(c string) string {
	const short = 12
	base, dirty := strings.CutSuffix(c, "-dirty")
	if len(base) != 40 && len(base) != 64 {
		return c
	}
	if dirty {
		return base[:short] + "-dirty"
	}
	return base[:short]
}
