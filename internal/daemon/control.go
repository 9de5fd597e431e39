package daemon

import (
	"log/slog"
	"net"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/control"
	"github.com/marshal-dev/marshal/internal/devguardwire"
	"github.com/marshal-dev/marshal/internal/events"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/metrics"
	"github.com/marshal-dev/marshal/internal/peer"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/reconcile"
)

// Surfaces of the control plane, as metrics label them.
const (
	surfaceAPI      = "api"
	surfaceDevGuard = "devguard"
)

// controlPlane attributes the callers of the local API and the DevGuard
// socket to the user or an agent, by the launches marshald made and the
// profiles declared, and records what it refuses to agents.
type controlPlane struct {
	surface  string
	launches peer.Launches
	host     identity.NetNS
	desired  *reconcile.DesiredStore
	recorder *events.Recorder
	metrics  *metrics.Metrics
	log      *slog.Logger
}

var (
	_ apiserver.Control    = (*controlPlane)(nil)
	_ devguardwire.Control = (*controlPlane)(nil)
)

// on returns the control plane as it judges the requests of surface.
func (c *controlPlane) on(surface string) *controlPlane {
	o := *c
	o.surface = surface
	return &o
}

// Caller implements apiserver.Control.
func (c *controlPlane) Caller(conn *net.UnixConn) control.Caller {
	_, who := peer.Caller(conn, c.launches, c.host)
	return c.callerOf(who)
}

// callerOf is who a peer is to the control plane: a launch is that
// agent, with its profile's grant; a peer in no scope in marshald's
// namespace is the user; anything else the most restricted agent.
func (c *controlPlane) callerOf(who peer.Who) control.Caller {
	switch {
	case who.Scoped():
		caller := control.Caller{Kind: control.Agent, Scope: who.Scope, Profile: who.Profile, Workspace: who.Workspace}
		if obj, ok := c.desired.Get(reconcile.Key{Kind: v1alpha1.KindProfile, Name: who.Profile}); ok {
			if p, ok := obj.(*v1alpha1.Profile); ok && p.Spec.Control != nil {
				grant := new(v1alpha1.ControlSpec)
				p.Spec.Control.DeepCopyInto(grant)
				caller.Grant = grant
			}
		}
		return caller
	case who.Unscoped == peer.UnscopedNone:
		return control.Caller{Kind: control.User}
	}
	claimed := who.Claimed.Scope
	if claimed == "" {
		claimed = who.Home
	}
	return control.Caller{Kind: control.Unattributed, Why: who.Unscoped, Claimed: claimed}
}

// Judged implements apiserver.Control: it counts the judgement and, for
// a refusal, records a ControlRefused event on the agent's Workspace, or
// on the Profile an unattributed caller's scope is named for.
func (c *controlPlane) Judged(caller control.Caller, action control.Action, refusal *control.Refusal) {
	verdict := metrics.ControlAllowed
	if refusal != nil {
		verdict = metrics.ControlRefused
	}
	if c.metrics != nil {
		c.metrics.ObserveControl(c.surface, string(caller.Kind), string(action), verdict)
	}
	if refusal == nil {
		return
	}
	c.log.Warn("control: refused an agent's request", "surface", c.surface, "caller", caller.Kind, "scope", caller.Scope,
		"claimed", caller.Claimed, "action", action, "target", refusal.Target)
	if c.recorder == nil {
		return
	}
	msg := refusal.Who() + ": " + refusal.Missing()
	switch {
	case caller.Workspace != "":
		c.recorder.Warning(reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: caller.Workspace}, control.ReasonControlRefused, msg)
	case caller.Claimed != "":
		if id, ok := scope.ParseScopeName(caller.Claimed); ok {
			c.recorder.Warning(reconcile.Key{Kind: v1alpha1.KindProfile, Name: id.Profile}, control.ReasonControlRefused, msg)
		}
	}
}
