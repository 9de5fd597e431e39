package v1alpha1

import (
	"errors"
	"strconv"
	"strings"
)

// FileAccess is what a filesystem rule, or the default, lets an agent do
// beneath a path.
type FileAccess string

const (
	// FileNone: the path cannot be read, listed, written or connected to;
	// it looks absent or refuses.
	FileNone FileAccess = "none"
	// FileRead: read, list and execute.
	FileRead FileAccess = "read"
	// FileWrite: read, and create, modify, remove and rename beneath it.
	FileWrite FileAccess = "write"
)

// FilesystemSpec is a profile's file and local socket policy, enforced by
// the kernel for the agent's whole process tree. Declaring it, even
// empty, gives the defaults (DefaultFilesystemRules), which a declared
// rule for the same path overrides.
type FilesystemSpec struct {
	// Default is the access to paths that no rule names: "read" or
	// "none". Default "read".
	Default FileAccess `json:"default,omitempty"`
	// Rules give access per path; the most specific path decides, and on
	// a tie the later rule.
	Rules []FilesystemRule `json:"rules,omitempty"`
}

// FilesystemRule gives one access to paths and everything beneath them.
type FilesystemRule struct {
	// Access is "none", "read" or "write". Required.
	Access FileAccess `json:"access"`
	// Paths are absolute, or begin with "~" (the launching user's home),
	// "{workspace}" (the workspace's root) or "{tmp}" (a private
	// temporary directory per launch, the agent's TMPDIR). No globs, no
	// relative paths, no "." or ".." elements.
	Paths []string `json:"paths,omitempty"`
}

// PathBase is what a rule path is relative to.
type PathBase string

const (
	// BaseRoot: an absolute path.
	BaseRoot PathBase = "/"
	// BaseHome: "~", the launching user's home directory.
	BaseHome PathBase = "~"
	// BaseWorkspace: "{workspace}", the workspace's root.
	BaseWorkspace PathBase = "{workspace}"
	// BaseTmp: "{tmp}", the launch's private temporary directory.
	BaseTmp PathBase = "{tmp}"
)

// RulePath is a parsed rule path: a base and a clean relative path
// beneath it ("" for the base itself).
type RulePath struct {
	Base PathBase
	Rel  string
}

// String writes p as it is declared.
func (p RulePath) String() string {
	switch {
	case p.Base == BaseRoot:
		return "/" + p.Rel
	case p.Rel == "":
		return string(p.Base)
	}
	return string(p.Base) + "/" + p.Rel
}

// Expand returns p as an absolute path, given the home directory, the
// workspace root and the temporary directory, each absolute and clean.
func (p RulePath) Expand(home, workspace, tmp string) string {
	base := "/"
	switch p.Base {
	case BaseHome:
		base = home
	case BaseWorkspace:
		base = workspace
	case BaseTmp:
		base = tmp
	}
	switch {
	case p.Rel == "":
		return base
	case base == "/":
		return "/" + p.Rel
	}
	return base + "/" + p.Rel
}

// MaxRulePathLength is the longest rule path, the kernel's PATH_MAX less
// its NUL.
const MaxRulePathLength = 4095

// ErrRulePath is wrapped by every error ParseRulePath returns.
var ErrRulePath = errors.New("invalid rule path")

type rulePathError struct{ msg string }

func (e *rulePathError) Error() string { return e.msg }
func (e *rulePathError) Unwrap() error { return ErrRulePath }

func badRulePath(msg string) error { return &rulePathError{msg: msg} }

// ParseRulePath parses a rule path: "/abs/path", "~", "~/rel",
// "{workspace}", "{workspace}/rel", "{tmp}" or "{tmp}/rel". It refuses
// globs, relative paths, other placeholders, "~user", and paths that are
// not written clean (a trailing or doubled '/', "." or ".." elements),
// so that what is written is what is enforced.
func ParseRulePath(s string) (RulePath, error) {
	switch {
	case s == "":
		return RulePath{}, badRulePath("must not be empty")
	case len(s) > MaxRulePathLength:
		return RulePath{}, badRulePath("must be no more than " + strconv.Itoa(MaxRulePathLength) + " bytes")
	case strings.IndexByte(s, 0) >= 0:
		return RulePath{}, badRulePath("must not contain NUL")
	case strings.ContainsAny(s, "*?["):
		return RulePath{}, badRulePath("must not contain a glob ('*', '?' or '['): name the directory whose tree the rule covers")
	}
	var p RulePath
	var rest string
	switch {
	case s[0] == '/':
		p.Base, rest = BaseRoot, s[1:]
	case s[0] == '~':
		p.Base, rest = BaseHome, s[1:]
		if rest != "" && rest[0] != '/' {
			return RulePath{}, badRulePath(`"~user" is not supported: write "~" for the launching user's home, or an absolute path`)
		}
	case s[0] == '{':
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return RulePath{}, badRulePath(`an unclosed placeholder: write "{workspace}" or "{tmp}"`)
		}
		switch base := PathBase(s[:end+1]); base {
		case BaseWorkspace, BaseTmp:
			p.Base, rest = base, s[end+1:]
		default:
			return RulePath{}, badRulePath(strconv.Quote(s[:end+1]) + ` is not a placeholder: write "{workspace}" or "{tmp}"`)
		}
		if rest != "" && rest[0] != '/' {
			return RulePath{}, badRulePath(`a placeholder must be followed by '/' or end the path, as in "` + string(p.Base) + `/dir"`)
		}
	default:
		return RulePath{}, badRulePath(`must be absolute or begin with "~", "{workspace}" or "{tmp}"`)
	}
	if p.Base != BaseRoot {
		rest = strings.TrimPrefix(rest, "/")
		if rest == "" && strings.HasSuffix(s, "/") {
			return RulePath{}, badRulePath("must not end with '/': write " + string(p.Base))
		}
	}
	if strings.ContainsAny(rest, "{}") {
		return RulePath{}, badRulePath(`a placeholder may only begin the path`)
	}
	if rest == "" {
		return p, nil
	}
	for elem := range strings.SplitSeq(rest, "/") {
		switch elem {
		case "":
			return RulePath{}, badRulePath("must not have an empty element (a doubled or trailing '/')")
		case ".", "..":
			return RulePath{}, badRulePath(`must not have "." or ".." elements: write the path it names`)
		}
	}
	p.Rel = rest
	return p, nil
}

// DefaultFilesystemRules are the rules every profile that declares
// spec.filesystem has before its own: the workspace, the launch's
// temporary directory and common tool caches writable, with the devices
// every program writes to; credential stores hidden; the workspace's
// git hooks and config read-only, while the rest of .git stays writable.
// marshald adds its own config dir, state dir and sockets as hidden at
// launch.
var DefaultFilesystemRules = []FilesystemRule{
	{Access: FileWrite, Paths: []string{"{workspace}", "{tmp}",
		"~/.cache", "~/.npm", "~/go/pkg/mod", "~/.cargo/registry",
		"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}},
	{Access: FileNone, Paths: []string{"~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gh", "~/.netrc",
		"~/.git-credentials", "~/.docker", "~/.kube", "~/.config/gcloud", "~/.azure"}},
	{Access: FileRead, Paths: []string{"{workspace}/.git/hooks", "{workspace}/.git/config"}},
}

// OriginDefault is the Origin of a rule from DefaultFilesystemRules.
const OriginDefault = "default"

// EffectiveFileRule is one path's access as a launch gets it, and where
// it comes from.
type EffectiveFileRule struct {
	Access FileAccess
	Path   RulePath
	// Origin is "default", a field path such as
	// "spec.filesystem.rules[1]", or what marshald added.
	Origin string `json:"origin"`
}

// Effective returns the rules a launch gets from fs: the defaults, then
// the declared rules, one per path, the later winning, in the order the
// paths first appear. Paths that do not parse are left out (Validate
// refuses them).
func (fs *FilesystemSpec) Effective() []EffectiveFileRule {
	var out []EffectiveFileRule
	at := map[RulePath]int{}
	add := func(r FilesystemRule, origin string) {
		for _, s := range r.Paths {
			p, err := ParseRulePath(s)
			if err != nil {
				continue
			}
			e := EffectiveFileRule{Access: r.Access, Path: p, Origin: origin}
			if i, ok := at[p]; ok {
				out[i] = e
				continue
			}
			at[p] = len(out)
			out = append(out, e)
		}
	}
	for _, r := range DefaultFilesystemRules {
		add(r, OriginDefault)
	}
	for i, r := range fs.Rules {
		add(r, NewPath("spec", "filesystem", "rules").Index(i).String())
	}
	return out
}

// filesystem checks a profile's filesystem policy.
func (v *validator) filesystem(p Path, fs *FilesystemSpec) {
	enum(v, p.Child("default"), fs.Default, FileRead, FileNone)
	for i, r := range fs.Rules {
		rp := p.Child("rules").Index(i)
		if v.required(rp.Child("access"), string(r.Access)) {
			enum(v, rp.Child("access"), r.Access, FileNone, FileRead, FileWrite)
		}
		if len(r.Paths) == 0 {
			v.add(rp.Child("paths"), "required: the paths the rule covers")
		}
		for j, s := range r.Paths {
			if _, err := ParseRulePath(s); err != nil {
				v.add(rp.Child("paths").Index(j), "%s", err.Error())
			}
		}
	}
}
