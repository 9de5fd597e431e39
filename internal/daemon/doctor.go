package daemon

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// doctor reports what this host can enforce and what is missing, with the
// fix for each missing piece.
func (d *Daemon) doctor(ctx context.Context) localapi.Doctor {
	rep := localapi.Doctor{Backend: d.backend.Name()}
	var checks []localapi.Check

	mounts, err := cgroup.ReadMounts()
	switch {
	case err != nil:
		checks = append(checks, localapi.Check{Name: "cgroup v2", Detail: err.Error(), Fix: "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup)"})
	case mounts.V2 == "":
		checks = append(checks, localapi.Check{Name: "cgroup v2", Detail: "no cgroup2 mount", Fix: "boot with systemd.unified_cgroup_hierarchy=1, or mount cgroup2"})
	default:
		layout := "unified"
		if len(mounts.V1) > 0 {
			layout = "hybrid: cpu, memory and pids may be in v1 hierarchies"
		}
		controllers, _ := os.ReadFile(filepath.Join(mounts.V2, "cgroup.controllers"))
		detail := fmt.Sprintf("at %s (%s); controllers: %s", mounts.V2, layout, orNone(strings.TrimSpace(string(controllers))))
		checks = append(checks, localapi.Check{Name: "cgroup v2", OK: true, Detail: detail})
	}

	checks = append(checks, d.systemdCheck())
	if d.cfg.Mode == ModeUser {
		checks = append(checks, lingerCheck())
	}

	caps, err := d.backend.Probe(ctx)
	if err != nil {
		checks = append(checks, localapi.Check{Name: "kernel enforcement", Detail: err.Error(), Fix: "see the error; marshalctl get hosts shows the last probe"})
	}
	for _, r := range cgroup.AllResources {
		e, ok := caps[r]
		if !ok {
			continue
		}
		rep.Enforcement = append(rep.Enforcement, v1alpha1.Enforcement{
			Resource: string(r), Level: e.Level, Method: string(e.Method), Controller: e.Controller,
		})
		c := localapi.Check{Name: "kernel enforcement: " + string(r), OK: e.Level == v1alpha1.LevelKernel}
		if c.OK {
			c.Detail = fmt.Sprintf("%s via %s", e.Method, e.Controller)
		} else {
			c.Detail = fmt.Sprintf("only %s (%s): limits are not enforced by the kernel", e.Level, e.Method)
			c.Fix = enforcementFix(d.backend.Name(), r)
		}
		checks = append(checks, c)
	}

	st := d.source.Status()
	c := localapi.Check{Name: "config dir", OK: !st.Missing && len(st.Errors) == 0 && !st.Held}
	switch {
	case st.Missing:
		c.Detail, c.Fix = d.cfg.ConfigDir+" does not exist", "create it and put manifests in it"
	case st.Held:
		c.Detail = fmt.Sprintf("%s was emptied; %d objects are held", d.cfg.ConfigDir, st.HeldObjects)
		c.Fix = "restore the manifests, or confirm with marshalctl apply --allow-empty"
	case len(st.Errors) > 0:
		c.Detail = fmt.Sprintf("%d load errors, first: %s", len(st.Errors), st.Errors[0].Error())
		c.Fix = "marshalctl validate " + d.cfg.ConfigDir
	default:
		c.Detail = fmt.Sprintf("%s: %d objects in %d files", d.cfg.ConfigDir, st.Objects, st.Files)
	}
	rep.Checks = append(checks, c)
	return rep
}

func (d *Daemon) systemdCheck() localapi.Check {
	c := localapi.Check{Name: "systemd manager"}
	var bus string
	if d.cfg.Mode == ModeUser {
		bus = os.Getenv("DBUS_SESSION_BUS_ADDRESS")
		if bus == "" && os.Getenv("XDG_RUNTIME_DIR") != "" {
			bus = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "bus")
		}
	} else {
		bus = "/run/systemd/private"
	}
	path := strings.TrimPrefix(bus, "unix:path=")
	reachable := path != "" && unix.Access(path, unix.W_OK) == nil
	switch {
	case reachable:
		c.OK, c.Detail = true, "reachable at "+path
	case d.backend.Name() != "systemd":
		c.OK, c.Detail = true, "not reachable; not needed with the "+d.backend.Name()+" backend"
	default:
		c.Detail = "not reachable"
		c.Fix = "start a user manager (loginctl enable-linger), or run with --backend cgroupfs"
	}
	return c
}

func lingerCheck() localapi.Check {
	c := localapi.Check{Name: "linger"}
	u, err := user.Current()
	if err != nil {
		c.OK, c.Detail = true, "unknown user; not checked"
		return c
	}
	if _, err := os.Stat(filepath.Join("/var/lib/systemd/linger", u.Username)); err == nil {
		c.OK, c.Detail = true, "enabled for "+u.Username
		return c
	}
	c.Detail = "not enabled for " + u.Username + ": the user manager, and agents' scopes, end when the last session does"
	c.Fix = "loginctl enable-linger " + u.Username
	return c
}

func enforcementFix(backend string, r cgroup.Resource) string {
	ctl := string(r)
	if r == cgroup.PIDs {
		ctl = "pids"
	}
	if backend == "systemd" {
		return fmt.Sprintf("delegate the %s controller to the manager (Delegate=yes on user@.service, or run marshald as a system service), or run as root with --backend cgroupfs on a hybrid host", ctl)
	}
	return fmt.Sprintf("enable the %s controller in the cgroup2 tree above the cgroup root (echo +%s > …/cgroup.subtree_control), or mount the v1 %s hierarchy", ctl, ctl, ctl)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
