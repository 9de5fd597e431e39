package daemon

import (
	"context"
	"fmt"
	"os"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/isolation"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// network is the launcher's Network: how executions of workspace w, for
// a caller of uid, reach the network.
//
//   - network.policy none: a namespace of their own with no bridge, no
//     egress at all, whatever the profile says;
//   - a profile with isolation netns: a namespace of their own whose only
//     way out is the bridge to the proxy's unix socket, where the proxy
//     variables point; without spec.egress the proxy allows every
//     destination but the private ranges;
//   - otherwise the host's network, with the proxy's TCP address offered
//     when the profile declares egress.
//
// A namespace of their own hides the host's services' sockets too
// (isolation.HostServices), through which an agent would get out of it:
// by its profile's filesystem rules where it has some, else by the
// helper's --hide.
//
// A namespace that cannot be had here (no helper, user namespaces
// disabled) refuses the launch, as does a proxy that does not listen
// where the launch would reach it: a launch never runs with less than
// its profile asks.
func (d *Daemon) network(w *v1alpha1.Workspace, uid uint32) (launch.Network, error) {
	prof := d.profile(w.Spec.Profile)
	n, err := d.networkOnly(w, prof, uid)
	if err != nil {
		return n, err
	}
	if prof == nil || prof.Spec.Filesystem == nil {
		if n.Netns != nil {
			n.Netns.Hide = isolation.HostServices(uid)
		}
		return n, nil
	}
	fs, err := d.filesystem(prof.Spec.Filesystem, w.Spec.Root, uid)
	if err != nil {
		return launch.Network{}, fmt.Errorf("profile %s: %w", prof.Metadata.Name, err)
	}
	if n.Netns == nil {
		helper, err := isolation.FindHelper()
		if err != nil {
			return launch.Network{}, err
		}
		n.Netns = &isolation.Launch{Helper: helper, HostNetwork: true}
	}
	n.Netns.Filesystem = fs
	return n, nil
}

func (d *Daemon) networkOnly(w *v1alpha1.Workspace, prof *v1alpha1.Profile, uid uint32) (launch.Network, error) {
	isolated := w.Spec.Network.Policy == v1alpha1.NetworkNone ||
		prof != nil && prof.Spec.Isolation == v1alpha1.IsolationNetns
	if !isolated {
		if prof == nil || prof.Spec.Egress == nil {
			return launch.Network{}, nil
		}
		if d.egress.vars == nil {
			return launch.Network{}, fmt.Errorf("profile %s: %w", prof.Metadata.Name, d.egress.state.unavailable())
		}
		return launch.Network{Env: d.egress.vars}, nil
	}
	helper, err := isolation.FindHelper()
	if err != nil {
		return launch.Network{}, err
	}
	if err := isolation.Check(uid); err != nil {
		return launch.Network{}, err
	}
	n := launch.Network{Netns: &isolation.Launch{Helper: helper}}
	if w.Spec.Network.Policy == v1alpha1.NetworkNone {
		return n, nil
	}
	if d.egress.info.Socket == "" {
		return launch.Network{}, fmt.Errorf("profile %s: the egress proxy has no unix socket: %w", prof.Metadata.Name, launch.ErrNoEgressProxy)
	}
	n.Netns.Socket = d.egress.info.Socket
	n.Env = proxyVars(isolation.BridgeAddress)
	return n, nil
}

// profile returns the declared profile name, nil when it is not declared.
func (d *Daemon) profile(name string) *v1alpha1.Profile {
	obj, ok := d.stores.Desired.Get(controllers.ProfileKey(name))
	if !ok {
		return nil
	}
	p, _ := obj.(*v1alpha1.Profile)
	return p
}

// netnsCheck says whether netns isolation is available here: the helper
// makes the namespaces as marshald's user, and the kernel's settings let
// an ordinary user make them too (in system mode, where the callers are
// other users). It fails only when something declared needs it.
func (d *Daemon) netnsCheck(ctx context.Context) localapi.Check {
	c := localapi.Check{Name: "netns isolation"}
	err := d.netnsAvailable(ctx)
	if err == nil {
		c.OK = true
		c.Detail = "available: marshal-confine makes a user and a network namespace here"
		return c
	}
	c.Detail = err.Error()
	c.Fix = "install marshal-confine beside marshald; allow user namespaces (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0), and no seccomp policy that forbids them"
	if needs := d.netnsNeeded(); needs != "" {
		c.Detail += "; " + needs + " needs it"
		return c
	}
	c.OK = true
	c.Detail += "; nothing declared needs it"
	return c
}

// netnsAvailable is nil when netns isolation can be had here.
func (d *Daemon) netnsAvailable(ctx context.Context) error {
	helper, err := isolation.FindHelper()
	if err != nil {
		return err
	}
	if err := isolation.Check(uint32(os.Geteuid())); err != nil {
		return err
	}
	if err := isolation.Probe(ctx, helper); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		// Callers other than root make theirs unprivileged.
		if err := isolation.Check(ordinaryUID); err != nil {
			return fmt.Errorf("for users other than root: %w", err)
		}
	}
	return nil
}

// ordinaryUID stands for any caller that is not root.
const ordinaryUID = 65534

// netnsNeeded names a declared profile or workspace that needs netns
// isolation, "" when none does.
func (d *Daemon) netnsNeeded() string {
	for _, obj := range d.stores.Desired.List(v1alpha1.KindProfile) {
		if p, ok := obj.(*v1alpha1.Profile); ok && p.Spec.Isolation == v1alpha1.IsolationNetns {
			return "profile " + p.Metadata.Name
		}
	}
	for _, obj := range d.stores.Desired.List(v1alpha1.KindWorkspace) {
		if w, ok := obj.(*v1alpha1.Workspace); ok && w.Spec.Network.Policy == v1alpha1.NetworkNone {
			return "workspace " + w.Metadata.Name
		}
	}
	return ""
}
