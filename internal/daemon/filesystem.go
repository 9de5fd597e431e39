package daemon

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/isolation"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// filesystem returns the confinement of a launch of a caller of uid in
// the workspace rooted at root under fs: its effective rules expanded,
// then marshald's own config dir, state dir and sockets, the user's
// runtime directory and the host's services (isolation.HostServices),
// hidden unless a rule names them. A host that cannot give it is an error wrapping
// isolation.ErrUnavailable, so the launch is refused before anything
// starts.
func (d *Daemon) filesystem(fs *v1alpha1.FilesystemSpec, root string, uid uint32) (*isolation.Filesystem, error) {
	if _, err := isolation.CheckFilesystem(uid); err != nil {
		return nil, err
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		return nil, &isolation.UnavailableError{What: isolation.WhatFilesystem, Reason: "the launching user's home directory is not in the password database"}
	}
	home := filepath.Clean(u.HomeDir)
	out := &isolation.Filesystem{Default: string(fs.Default)}
	if out.Default == "" {
		out.Default = string(v1alpha1.FileRead)
	}
	named := map[string]bool{}
	for _, r := range fs.Effective() {
		p := r.Path.Expand(home, root, isolation.TmpPrefix)
		named[p] = true
		out.Rules = append(out.Rules, isolation.FileRule{Access: string(r.Access), Path: p, Origin: r.Origin})
	}
	hidden := append(d.ownPaths(), isolation.RuntimeDir(uid))
	for _, p := range append(hidden, isolation.HostServices(uid)...) {
		if !named[p] {
			out.Rules = append(out.Rules, isolation.FileRule{Access: string(v1alpha1.FileNone), Path: p})
		}
	}
	return out, nil
}

// ownPaths are marshald's config dir, state dir and sockets, which an
// agent under filesystem rules cannot reach unless a rule names them. A
// socket in a directory of marshald's own (/run/marshal) is hidden with
// its directory, so that a socket made again on a restart stays hidden.
func (d *Daemon) ownPaths() []string {
	var out []string
	add := func(p string) {
		if p != "" && filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	add(d.cfg.ConfigDir)
	add(d.cfg.StateDir)
	for _, s := range []string{d.cfg.Socket, d.egress.info.Socket, d.cfg.DevGuardSocket} {
		if s == "" {
			continue
		}
		if dir := filepath.Dir(s); strings.HasPrefix(filepath.Base(dir), "marshal") {
			add(dir)
		} else {
			add(s)
		}
	}
	return out
}

// filesystemChecks say, for marshalctl doctor, what filesystem
// confinement this host gives, then, for each declared profile with
// spec.filesystem, whether its launches get their rules here or are
// refused, and why.
func (d *Daemon) filesystemChecks(ctx context.Context) []localapi.Check {
	c := localapi.Check{Name: "filesystem confinement"}
	var profiles []*v1alpha1.Profile
	var needs []string
	for _, obj := range d.stores.Desired.List(v1alpha1.KindProfile) {
		if p, ok := obj.(*v1alpha1.Profile); ok && p.Spec.Filesystem != nil {
			profiles = append(profiles, p)
			needs = append(needs, p.Metadata.Name)
		}
	}
	fix := "install " + isolation.HelperName + " beside marshald; a kernel with Landlock ABI 2 or later (Linux 5.19+, landlock in lsm=); allow user namespaces " +
		"(user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 install dist/apparmor/marshal-confine)"
	abi, err := d.filesystemAvailable(ctx)
	given := ""
	switch {
	case err == nil:
		c.OK = true
		c.Detail = fmt.Sprintf("available: Landlock ABI %d with mounts in a user namespace", abi)
		given = fmt.Sprintf("given: Landlock ABI %d with mounts in a user namespace", abi)
		if abi < isolation.ScopeLandlockABI {
			unscoped := fmt.Sprintf("; abstract unix sockets and signals are not scoped (Landlock ABI %d or later does)", isolation.ScopeLandlockABI)
			c.Detail += unscoped
			given += unscoped
		}
		if len(needs) > 0 {
			c.Detail += "; profiles " + strings.Join(needs, ", ") + " get their rules"
		}
	case len(needs) > 0:
		c.Detail = err.Error() + "; launches of profiles " + strings.Join(needs, ", ") + " are refused"
		c.Fix = fix
	default:
		c.OK = true
		c.Detail = err.Error() + "; no profile declares spec.filesystem"
	}
	checks := []localapi.Check{c}
	for _, p := range profiles {
		pc := localapi.Check{Name: "filesystem confinement: profile " + p.Metadata.Name, OK: err == nil}
		rules := len(p.Spec.Filesystem.Effective())
		def := p.Spec.Filesystem.Default
		if def == "" {
			def = v1alpha1.FileRead
		}
		if err == nil {
			pc.Detail = fmt.Sprintf("its %d rules (default %s) are %s", rules, def, given)
		} else {
			pc.Detail = fmt.Sprintf("its %d rules cannot be given here, its launches are refused with ISOLATION_UNSUPPORTED: %v", rules, err)
			pc.Fix = fix
		}
		checks = append(checks, pc)
	}
	return checks
}

func (d *Daemon) filesystemAvailable(ctx context.Context) (int, error) {
	helper, err := isolation.FindHelper()
	if err != nil {
		return 0, err
	}
	if _, err := isolation.CheckFilesystem(uint32(os.Geteuid())); err != nil {
		return 0, err
	}
	return isolation.ProbeFilesystem(ctx, helper)
}
