package daemon

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
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
		rep.Enforcement = append(rep.Enforcement, e.Of(r))
		c := localapi.Check{Name: "kernel enforcement: " + string(r), OK: e.Level == v1alpha1.LevelKernel}
		if c.OK {
			c.Detail = fmt.Sprintf("%s via %s", e.Method, e.Controller)
		} else {
			c.Detail = fmt.Sprintf("only %s (%s): limits are not enforced by the kernel", e.Level, e.Method)
			if e.Reason != "" {
				c.Detail += ": " + e.Reason
			}
			c.Fix = enforcementFix(d.backend.Name(), r)
		}
		checks = append(checks, c)
	}

	checks = append(checks, d.admissionCheck(), d.netnsCheck(ctx), d.egressCheck())
	checks = append(checks, d.filesystemChecks(ctx)...)

	if d.kube != nil {
		rep.Checks = append(checks, d.kubernetesCheck())
		return rep
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

// admissionCheck says whether the admission authority can decide, and
// why not.
func (d *Daemon) admissionCheck() localapi.Check {
	s := d.auth.Snapshot()
	c := localapi.Check{Name: "admission", OK: s.Ready}
	since := ""
	if !s.JournalFailedAt.IsZero() {
		since = " since " + s.JournalFailedAt.UTC().Format(time.RFC3339)
	}
	switch s.NotReady {
	case "":
		c.Detail = fmt.Sprintf("ready; %d attempts hold reservations", s.Charged)
	case admission.NotReadyJournalFull:
		c.Detail = fmt.Sprintf("launches of participating workspaces are refused%s: the state disk is full (%s free in %s), so the journal cannot record them",
			since, freeSpace(d.cfg.StateDir), d.cfg.StateDir)
		c.Fix = "free space on the file system of " + d.cfg.StateDir + "; the next launch tries again, no restart needed"
	case admission.NotReadyJournalFailed:
		c.Detail = "launches of participating workspaces are refused" + since + ": a journal write failed; marshald's log has the cause"
		c.Fix = "check the state disk of " + d.cfg.StateDir + "; the next launch tries again, no restart needed"
	case admission.NotReadyJournalUnknown:
		c.Detail = "launches of participating workspaces are refused" + since + ": a journal commit reported failure yet was written, so its outcome is unknown"
		c.Fix = "check the state disk of " + d.cfg.StateDir + ", then restart marshald: it checks the journal when it opens it"
	default:
		c.Detail = "not ready: " + string(s.NotReady)
		c.Fix = "marshalctl describe host shows what the authority waits for"
	}
	return c
}

// freeSpace says how many bytes the file system of dir has free for an
// unprivileged writer.
func freeSpace(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%d bytes", int64(st.Bavail)*st.Bsize)
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
	ctl := string(r) // a resource is named as its controller
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
