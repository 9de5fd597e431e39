package launch

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/isolation"
)

// Environment variables every execution gets, beside the workspace's
// exec.env: they say where it runs and under which policy.
const (
	EnvWorkspace = "MARSHAL_WORKSPACE"
	EnvProfile   = "MARSHAL_PROFILE"
	EnvNetwork   = "MARSHAL_NETWORK"
	// EnvIsolation is the profile's isolation as the execution gets it:
	// cgroup, or netns when it runs in a network namespace of its own.
	EnvIsolation = "MARSHAL_ISOLATION"
)

// Network is how an execution reaches the network.
type Network struct {
	// Env is the environment the profile's egress gives every execution
	// over the workspace's exec.env: the egress proxy's variables.
	Env map[string]string
	// Netns, when set, runs the execution through this helper: under
	// netns isolation unless HostNetwork, with a bridge to the egress
	// proxy when its Socket is set, and confined in its files when its
	// Filesystem is set. Its Attempt and ID are the launch's own.
	Netns *isolation.Launch
}

// Request is one launch as its caller asks for it.
type Request struct {
	// Workspace names the workspace to run in.
	Workspace string
	// Argv is the command as given; argv[0] is resolved with the final
	// environment's PATH from the workspace root.
	Argv []string
	// TTY reports whether the execution runs on the caller's terminal.
	TTY bool
	// Timeout bounds the execution: its scope is killed when it expires.
	// Zero is none.
	Timeout time.Duration
	// Env is the caller's environment, KEY=VALUE entries as the kernel
	// holds them (bytes, not necessarily UTF-8).
	Env []string
	// UID is the caller's uid, which decides whether netns isolation can
	// be had for it, for Explain; a launch takes its caller's.
	UID uint32
}

// Execution is a request resolved against its workspace: what runs, where,
// with which environment, and what it reserves.
type Execution struct {
	Workspace     string
	Profile       string
	Network       v1alpha1.NetworkPolicy
	Participation v1alpha1.Participation
	// Dir is the workspace root, the working directory.
	Dir string
	// Path is the absolute path argv[0] resolves to.
	Path string
	Argv []string
	// Changes is what the execution's environment has beyond the
	// caller's: exec.env and the MARSHAL_* variables.
	Changes map[string]string
	// Env is the final environment: the caller's with Changes applied.
	Env []string
	// Isolation is how the execution is separated: netns when it runs in
	// a network namespace of its own.
	Isolation v1alpha1.Isolation
	TTY       bool
	Timeout   time.Duration
	// Intent is what the execution reserves.
	Intent admission.Intent
}

// resolve checks req against w's policy and resolves it on network net:
// the environment its profile gives every execution over the workspace's
// exec.env, and its isolation. It returns a refusal (State not_asked)
// when the policy does not allow it.
func resolve(w *v1alpha1.Workspace, req Request, net Network) (Execution, *Refusal) {
	refuse := func(code Code, detail string) (Execution, *Refusal) {
		return Execution{}, &Refusal{Code: code, Detail: detail, State: StateNotAsked, cause: ErrNotAuthorized}
	}
	s := w.Spec
	if s.Exec.Allow != nil && !*s.Exec.Allow {
		return refuse(CodeExecNotAllowed, detailExecNotAllowed)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return refuse(CodeExecNotAllowed, detailNotFound)
	}
	if len(s.Exec.Argv0) > 0 && !slices.Contains(s.Exec.Argv0, req.Argv[0]) {
		return refuse(CodeExecNotAllowed, detailArgv0NotAllowed)
	}
	if fi, err := os.Stat(s.Root); err != nil || !fi.IsDir() {
		return refuse(CodeWorkspaceNotReady, detailRootMissing)
	}
	x := Execution{
		Workspace:     w.Metadata.Name,
		Profile:       s.Profile,
		Network:       s.Network.Policy,
		Participation: v1alpha1.ParticipationNone,
		Dir:           s.Root,
		Argv:          slices.Clone(req.Argv),
		TTY:           req.TTY,
		Timeout:       req.Timeout,
	}
	if s.Resources != nil {
		x.Participation = s.Resources.Participation
		if s.Resources.Request != nil {
			in, err := admission.IntentFor(s.Profile, *s.Resources.Request)
			if err != nil {
				return refuse(CodeInternal, detailNotReady)
			}
			x.Intent = in
		}
	}
	x.Changes = maps.Clone(s.Exec.Env)
	if x.Changes == nil {
		x.Changes = map[string]string{}
	}
	maps.Copy(x.Changes, net.Env)
	x.Isolation = v1alpha1.IsolationCgroup
	if net.Netns != nil && !net.Netns.HostNetwork {
		x.Isolation = v1alpha1.IsolationNetns
	}
	x.Changes[EnvIsolation] = string(x.Isolation)
	x.Changes[EnvWorkspace] = x.Workspace
	x.Changes[EnvProfile] = x.Profile
	x.Changes[EnvNetwork] = string(x.Network)
	for _, a := range x.Argv {
		if !utf8.ValidString(a) {
			return refuse(CodeExecNotAllowed, detailNotUTF8)
		}
	}
	x.Env = applyEnv(req.Env, x.Changes)
	path, ok := lookPath(x.Argv[0], getenv(x.Env, "PATH"), x.Dir)
	if !ok {
		return refuse(CodeExecNotAllowed, detailNotFound)
	}
	x.Path = path
	return x, nil
}

// Meaning returns the execution's meaning, as the authority's digest
// covers it.
func (x Execution) Meaning() admission.ExecutionMeaning {
	return admission.ExecutionMeaning{
		ExecutableIdentity: x.Path,
		CWDIdentity:        x.Dir,
		Argv:               x.Argv,
		EnvironmentChanges: x.Changes,
		TTY:                x.TTY,
		TimeoutMS:          timeoutMS(x.Timeout),
		Resources:          x.Intent,
	}
}

// timeoutMS is a timeout in milliseconds, at least one; no timeout is
// admission.NoTimeout, as the digest's contract says.
func timeoutMS(d time.Duration) uint64 {
	if d <= 0 {
		return admission.NoTimeout
	}
	return uint64(max(d.Milliseconds(), 1))
}

// digest returns the meaning's digest. A meaning the digest cannot cover
// (a string that is not UTF-8) is a refusal.
func (x Execution) digest() (string, *Refusal) {
	d, err := x.Meaning().Digest()
	if err != nil {
		return "", &Refusal{Code: CodeExecNotAllowed, Detail: detailNotUTF8, State: StateNotAsked, cause: err}
	}
	return d, nil
}

// applyEnv returns env with changes applied: a changed variable keeps the
// place of its first occurrence and loses any later one; new ones follow,
// sorted. Entries without '=' are kept as they are.
func applyEnv(env []string, changes map[string]string) []string {
	out := make([]string, 0, len(env)+len(changes))
	done := make(map[string]bool, len(changes))
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		v, change := changes[k]
		switch {
		case !ok || !change:
			out = append(out, kv)
		case !done[k]:
			out = append(out, k+"="+v)
			done[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		if !done[k] {
			out = append(out, k+"="+changes[k])
		}
	}
	return out
}

// getenv returns the value of the first entry of key in env, the one
// glibc's getenv finds.
func getenv(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath resolves file as execvp would with path as PATH, relative
// directories (and an empty element, the working directory) taken from
// dir. A file with a slash is taken as a path, relative to dir. It
// returns the cleaned absolute path of the first regular file with an
// execute bit.
func lookPath(file, path, dir string) (string, bool) {
	abs := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return filepath.Clean(p)
	}
	if strings.Contains(file, "/") {
		p := abs(file)
		return p, executable(p)
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if p := abs(filepath.Join(d, file)); executable(p) {
			return p, true
		}
	}
	return "", false
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	return fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
