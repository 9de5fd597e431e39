package cli

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/marshal-dev/marshal/internal/cgroupmount"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// localHost is the machine doctor looks at; tests point it at a tree of
// their own.
var localHost = hostView{root: "/", euid: os.Geteuid(), getenv: os.Getenv}

// hostView is what doctor reads of the machine: files below root, the
// effective uid and the environment.
type hostView struct {
	root   string
	euid   int
	getenv func(string) string
}

// path is p, an absolute path on the host, as doctor reads it.
func (h hostView) path(p string) string { return filepath.Join(h.root, p) }

// hostDirs are the config and state dirs the local checks look at: the
// daemon's when it answered, else its mode's defaults.
type hostDirs struct {
	config, state string
}

// localChecks are what doctor checks without marshald: the cgroup
// mounts, where the controllers marshald needs are, the systemd manager,
// the config and state dirs.
func localChecks(ctx context.Context, h hostView, dirs hostDirs) []localapi.Check {
	mounts, err := readMounts(h)
	var checks []localapi.Check
	switch {
	case err != nil:
		checks = append(checks, localapi.Check{Name: "cgroup v2", Detail: err.Error(), Fix: "run doctor where /proc is mounted"})
	case mounts.V2 == "":
		checks = append(checks, localapi.Check{Name: "cgroup v2", Detail: "no cgroup2 mount",
			Fix: "boot with systemd.unified_cgroup_hierarchy=1, or mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup)"})
	default:
		layout := "unified"
		if len(mounts.V1) > 0 {
			layout = "hybrid: v1 hierarchies are mounted too"
		}
		checks = append(checks, localapi.Check{Name: "cgroup v2", OK: true, Detail: fmt.Sprintf("at %s (%s)", mounts.V2, layout)})
		checks = append(checks, controllersCheck(h, mounts))
	}
	checks = append(checks, systemdCheck(ctx, h), dirCheck("config dir", dirs.config, false), dirCheck("state dir", dirs.state, true))
	return checks
}

func readMounts(h hostView) (cgroupmount.Mounts, error) {
	f, err := os.Open(h.path("/proc/self/mountinfo"))
	if err != nil {
		return cgroupmount.Mounts{}, fmt.Errorf("finding cgroup mounts: %w", err)
	}
	defer f.Close()
	return cgroupmount.Parse(f)
}

// controllersCheck says where each controller marshald limits with is:
// in cgroup2, delegated to the group marshald works under (the user
// manager's in user mode, the root in system mode), or in a v1
// hierarchy.
func controllersCheck(h hostView, m cgroupmount.Mounts) localapi.Check {
	group := "/"
	if h.euid != 0 {
		group = userManagerGroup(h)
	}
	data, _ := os.ReadFile(h.path(path.Join(m.V2, group, "cgroup.controllers")))
	delegated := strings.Fields(string(data))
	c := localapi.Check{Name: "controllers", OK: true}
	var parts, missing []string
	for _, ctl := range []string{"cpu", "memory", "pids"} {
		switch {
		case contains(delegated, ctl):
			parts = append(parts, ctl+" in cgroup2")
		case m.V1[ctl] != "":
			parts = append(parts, ctl+" in v1 at "+m.V1[ctl])
		default:
			parts = append(parts, ctl+" missing")
			missing = append(missing, ctl)
		}
	}
	c.Detail = strings.Join(parts, ", ") + " (cgroup2 group " + group + ")"
	if len(missing) > 0 {
		c.OK = false
		if h.euid != 0 {
			c.Fix = "delegate " + strings.Join(missing, ", ") + " to the user manager (Delegate=yes for user@.service), or run marshald as root"
		} else {
			c.Fix = "enable " + strings.Join(missing, ", ") + " in the cgroup2 root (echo +CONTROLLER > cgroup.subtree_control), or mount its v1 hierarchy"
		}
	}
	return c
}

// userManagerGroup is the cgroup2 group of this user's systemd manager,
// user@UID.service, found among the ancestors of this process's group;
// "/" when there is none.
func userManagerGroup(h hostView) string {
	data, _ := os.ReadFile(h.path("/proc/self/cgroup"))
	for _, line := range strings.Split(string(data), "\n") {
		p, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		want := fmt.Sprintf("user@%d.service", h.euid)
		parts := strings.Split(p, "/")
		for i, part := range parts {
			if part == want {
				return strings.Join(parts[:i+1], "/")
			}
		}
	}
	return "/"
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// systemdCheck connects to the systemd manager marshald would use: PID 1
// as root, the user's manager otherwise. Without one as root, marshald
// writes the cgroup tree itself.
func systemdCheck(ctx context.Context, h hostView) localapi.Check {
	c := localapi.Check{Name: "systemd manager"}
	socket := "/run/systemd/private"
	if h.euid != 0 {
		if !h.systemdBooted() {
			// No user manager can be started: say what works instead.
			c.Detail = "PID 1 is not systemd, so there is no user manager to start"
			c.Fix = noUserManagerFix
			return c
		}
		dir := h.getenv("XDG_RUNTIME_DIR")
		if dir == "" {
			c.Detail = "XDG_RUNTIME_DIR is not set, so the user manager cannot be found"
			c.Fix = "log in through a session that sets it (ssh, a desktop login, or machinectl shell $USER@), or run marshald as root"
			return c
		}
		socket = path.Join(dir, "systemd/private")
	}
	// client.Dial, not package net: marshalctl links no more of net than
	// a unix socket needs.
	conn, err := client.Dial(ctx, h.path(socket))
	switch {
	case err == nil:
		conn.Close()
		c.OK, c.Detail = true, "reachable at "+socket
	case h.euid == 0:
		c.OK, c.Detail = true, "not reachable at "+socket+"; marshald writes the cgroup tree itself (cgroupfs backend)"
	default:
		c.Detail = "user manager not reachable at " + socket
		c.Fix = "start it (loginctl enable-linger $USER, then log in again), or run marshald as root"
	}
	return c
}

// noUserManagerFix is what an ordinary user can do where PID 1 is not
// systemd: without a manager to delegate a cgroup, only root can move a
// launch's caller into its scope.
const noUserManagerFix = "run marshald as root, which writes the cgroup tree itself; " +
	"marshald --allow-group GROUP lets the members of GROUP use it"

// systemdBooted reports whether the host runs systemd as PID 1, as
// sd_booted(3) tells: /run/systemd/system exists.
func (h hostView) systemdBooted() bool {
	fi, err := os.Stat(h.path("/run/systemd/system"))
	return err == nil && fi.IsDir()
}

// dirCheck checks a directory marshald uses. A missing state dir is
// made on the first start; a missing config dir means nothing is
// declared.
func dirCheck(name, dir string, created bool) localapi.Check {
	c := localapi.Check{Name: name}
	if dir == "" {
		c.OK, c.Detail = true, "unknown (not checked)"
		return c
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		c.OK, c.Detail = true, dir
	case err == nil:
		c.Detail, c.Fix = dir+" is not a directory", "remove it, or start marshald with another --"+strings.ReplaceAll(name, " ", "-")
	case os.IsNotExist(err) && created:
		c.OK, c.Detail = true, dir+" does not exist yet; marshald makes it on its first start"
	case os.IsNotExist(err):
		c.Detail, c.Fix = dir+" does not exist", "mkdir -p "+dir+" and put manifests in it"
	default:
		c.Detail = err.Error()
	}
	return c
}

// defaultDirs are the mode's config and state dirs, as marshald picks
// them without flags.
func defaultDirs(h hostView) hostDirs {
	config, state, err := localapi.DefaultDirsFor(h.euid, h.getenv)
	if err != nil {
		return hostDirs{}
	}
	return hostDirs{config: config, state: state}
}
