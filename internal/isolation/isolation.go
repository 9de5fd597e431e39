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

// HelperName is the helper's file name.
//
// It makes the namespaces and confinement a launch needs in the
// launching process itself, then execs the agent.
const HelperName = "marshal-confine"

// BridgePort is where the bridge listens inside every namespace: each has
// a loopback of its own, so one port serves them all, and an agent's
// environment does not depend on which launch it is.
const BridgePort = 3128

// BridgeAddress is the bridge's address inside the namespace.
var BridgeAddress = "127.0.0.1:" + strconv.Itoa(BridgePort)

// FindHelper returns the helper beside the running executable (marshald
// and marshal-confine are installed together), else the one on PATH.
func FindHelper() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), HelperName)
		if executable(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(HelperName)
	if err != nil {
		return "", unavailable(HelperName + " is not installed beside marshald or on PATH")
	}
	return filepath.Abs(p)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Launch is what the helper needs to run one execution.
type Launch struct {
	// Helper is marshal-confine's path.
	Helper string
	// HostNetwork keeps the host's network: no network namespace, for a
	// launch that is confined only in its files.
	HostNetwork bool
	// Filesystem, when set, confines the execution's files and local
	// sockets.
	Filesystem *Filesystem
	// ID is the launch's ID, which names its temporary directory.
	ID string
	// Socket is the egress proxy's unix socket, which the bridge relays
	// to; "" for no bridge and no egress at all.
	Socket string
	// Attempt is the launch's attempt, which a refusal names; "" for
	// none.
	Attempt string
	// Hide are paths hidden from a launch in a network namespace without
	// Filesystem, which hides them by its rules (HostServices).
	Hide []string
}

// Command returns the path and arguments that run path with argv under
// netns isolation: the helper, which execs path with argv (argv[0]
// included) once the namespace and the bridge are made.
func (l Launch) Command(path string, argv []string) (string, []string) {
	args := make([]string, 0, 9+len(argv))
	args = append(args, l.Helper, "exec")
	if l.HostNetwork {
		args = append(args, "--network", "host")
	}
	if fs := l.Filesystem; fs != nil {
		args = fs.args(args, TmpDir(l.ID))
	}
	if l.Socket != "" {
		args = append(args, "--socket", l.Socket, "--port", strconv.Itoa(BridgePort))
	}
	for _, p := range l.Hide {
		args = append(args, "--hide", p)
	}
	if l.Attempt != "" {
		args = append(args, "--attempt", l.Attempt)
	}
	if len(argv) > 0 {
		args = append(args, "--argv0", argv[0])
	}
	args = append(args, "--", path)
	if len(argv) > 1 {
		args = append(args, argv[1:]...)
	}
	return l.Helper, args
}

// The kernel's settings that decide whether a user may make user and
// network namespaces, beside seccomp policies, which only a try shows.
const (
	sysctlMaxUserNS     = "/proc/sys/user/max_user_namespaces"
	sysctlMaxNetNS      = "/proc/sys/user/max_net_namespaces"
	sysctlUnprivileged  = "/proc/sys/kernel/unprivileged_userns_clone"
	sysctlAppArmor      = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
	procUserNS          = "/proc/self/ns/user"
	procNetNS           = "/proc/self/ns/net"
	reasonNoUserNS      = "this kernel has no user namespaces"
	reasonNoNetNS       = "this kernel has no network namespaces"
	reasonMaxUserNS     = "user namespaces are disabled (user.max_user_namespaces is 0)"
	reasonMaxNetNS      = "network namespaces are disabled (user.max_net_namespaces is 0)"
	reasonUnprivileged  = "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone is 0)"
	reasonAppArmor      = "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns is 1)"
	reasonProbeNoReason = "marshal-confine check failed"
)

// Check says, from the kernel's settings alone, whether uid may make the
// user and network namespaces of netns isolation: nil, or an
// *UnavailableError naming the setting that forbids it. It reads a few
// small files and starts nothing; Probe tries.
func Check(uid uint32) error {
	return check(uid, os.ReadFile)
}

func check(uid uint32, read func(string) ([]byte, error)) error {
	return checkNamespaces(uid, read, true)
}

// checkNamespaces is check, of the network namespace too when net is
// set.
func checkNamespaces(uid uint32, read func(string) ([]byte, error), net bool) error {
	if _, err := read(procUserNS); errors.Is(err, os.ErrNotExist) {
		return unavailable(reasonNoUserNS)
	}
	if _, err := read(procNetNS); net && errors.Is(err, os.ErrNotExist) {
		return unavailable(reasonNoNetNS)
	}
	setting := func(path string) (int, bool) {
		b, err := read(path)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil
	}
	if n, ok := setting(sysctlMaxUserNS); ok && n == 0 {
		return unavailable(reasonMaxUserNS)
	}
	if n, ok := setting(sysctlMaxNetNS); net && ok && n == 0 {
		return unavailable(reasonMaxNetNS)
	}
	if uid == 0 {
		return nil
	}
	if n, ok := setting(sysctlUnprivileged); ok && n == 0 {
		return unavailable(reasonUnprivileged)
	}
	if n, ok := setting(sysctlAppArmor); ok && n != 0 {
		return unavailable(reasonAppArmor)
	}
	return nil
}

// Probe runs "helper check" as this process's user: it makes the
// namespaces and exits. It returns nil when they could be made, else an
// *UnavailableError with the helper's own reason.
func Probe(ctx context.Context, helper string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helper, "check")
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("running %s check: %w", helper, err)
	}
	// ISOLATION_UNSUPPORTED: netns isolation unavailable: REASON
	line, _, _ := strings.Cut(stderr.String(), "\n")
	if _, reason, ok := strings.Cut(line, WhatNetns+" unavailable: "); ok {
		return unavailable(reason)
	}
	return unavailable(reasonProbeNoReason)
}
