package isolation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// TmpPrefix begins a rule path beneath the launch's temporary directory,
// which only the launch's ID names.
const TmpPrefix = "{tmp}"

// LandlockABIMaxEnv, when set to a number, lowers the Landlock ABI that
// marshald and the helper use to at most it: a host that gives less can
// be tried on one that gives more. It can only make a launch refused,
// never confined less.
const LandlockABIMaxEnv = "MARSHAL_LANDLOCK_ABI_MAX"

// MinLandlockABI is the lowest Landlock ABI filesystem confinement
// needs: 2, where a file may be renamed or linked into another
// directory, as git does. From ScopeLandlockABI, abstract unix sockets
// and signals are scoped to the agent's tree too.
const (
	MinLandlockABI   = 2
	ScopeLandlockABI = 6
)

// Filesystem is a launch's filesystem confinement, its paths expanded
// but for the temporary directory.
type Filesystem struct {
	// Default is "read" or "none".
	Default string
	// Rules are applied in order, the later winning on the same path.
	Rules []FileRule
}

// FileRule is one path's access: "none", "read" or "write". Path is
// absolute, or begins with TmpPrefix. Origin, the field path of the rule
// that set it ("spec.filesystem.rules[1]", or "default"), is what the
// helper's refusal names; "" for marshald's own paths.
type FileRule struct {
	Access string
	Path   string
	Origin string
}

// TmpDir is the temporary directory of the launch with ID id, which the
// helper makes and marshald removes when the launch is forgotten.
func TmpDir(id string) string {
	return filepath.Join(os.TempDir(), "marshal-tmp-"+id)
}

func (fs *Filesystem) args(args []string, tmp string) []string {
	args = append(args, "--fs-default", fs.Default, "--tmp", tmp)
	for _, r := range fs.Rules {
		p := r.Path
		if rest, ok := strings.CutPrefix(p, TmpPrefix); ok {
			p = tmp + rest
		}
		access := r.Access
		if r.Origin != "" && !strings.ContainsAny(r.Origin, ":@") {
			access += "@" + r.Origin
		}
		args = append(args, "--fs", access+":"+p)
	}
	return args
}

// CheckFilesystem says, from the kernel alone, whether filesystem
// confinement can be had for uid here: Landlock at MinLandlockABI or
// later (lowered by LandlockABIMaxEnv), and the user namespaces its
// mounts need. It returns the ABI it would use, or an *UnavailableError
// naming what is missing. It starts nothing; ProbeFilesystem tries.
func CheckFilesystem(uid uint32) (int, error) {
	abi, err := LandlockABI()
	if err != nil {
		return 0, err
	}
	if abi < MinLandlockABI {
		return abi, fsUnavailable(fmt.Sprintf("Landlock ABI %d or later is needed, this host gives %d (Linux 5.19 or later)", MinLandlockABI, abi))
	}
	if err := checkNamespaces(uid, os.ReadFile, false); err != nil {
		var ue *UnavailableError
		if errors.As(err, &ue) {
			return abi, fsUnavailable(ue.Reason)
		}
		return abi, err
	}
	return abi, nil
}

// LandlockABI returns the Landlock ABI this host gives, lowered by
// LandlockABIMaxEnv, or an *UnavailableError when it has none.
func LandlockABI() (int, error) {
	abi, err := landlockABI()
	if err != nil {
		return 0, err
	}
	if s := os.Getenv(LandlockABIMaxEnv); s != "" {
		if m, err := strconv.Atoi(s); err == nil && m >= 0 && m < abi {
			abi = m
		}
	}
	return abi, nil
}

// ProbeFilesystem runs "helper check --fs" as this process's user: it
// makes a user and mount namespace, a tmpfs in it, and enforces a
// Landlock ruleset. It returns the Landlock ABI the helper used, or an
// *UnavailableError with the helper's own reason.
func ProbeFilesystem(ctx context.Context, helper string) (int, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helper, "check", "--fs")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		var abi int
		if _, err := fmt.Sscanf(stdout.String(), "landlock abi %d", &abi); err != nil {
			return 0, fmt.Errorf("%s check --fs said %q", helper, stdout.String())
		}
		return abi, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, fmt.Errorf("running %s check --fs: %w", helper, err)
	}
	line, _, _ := strings.Cut(stderr.String(), "\n")
	if _, reason, ok := strings.Cut(line, WhatFilesystem+" unavailable: "); ok {
		return 0, fsUnavailable(reason)
	}
	return 0, fsUnavailable(HelperName + " check --fs failed")
}
