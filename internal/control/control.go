package control

import (
	"fmt"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Action is a kind of request to marshald, as the control plane judges
// it.
type Action string

// Actions, from reading to administering.
const (
	// Read: get, describe, events, wait, identify, doctor, version,
	// validate, diff, a dry-run apply or delete, run --explain, metrics
	// and the egress log.
	Read Action = "read"
	// Run: a run into a workspace, named as Authorize's target.
	Run Action = "run"
	// Apply declares or changes objects.
	Apply Action = "apply"
	// Delete stops declaring objects.
	Delete Action = "delete"
	// Stop ends an agent's tree: stop and kill.
	Stop Action = "stop"
	// Admin confirms an emptied config dir or copies the journal.
	Admin Action = "admin"
	// Consumer presents the secret of the Consumer named as Authorize's
	// target on the DevGuard socket.
	Consumer Action = "consumer"
)

// Kind is who a caller is to the control plane.
type Kind string

// Kinds of caller, as metrics and logs label them.
const (
	// User is a process in no marshal scope in marshald's network
	// namespace.
	User Kind = "user"
	// Agent is a process of a launch marshald made.
	Agent Kind = "agent"
	// Unattributed is a process in a scope marshald did not launch, in
	// another launch's network namespace, or whose place the kernel
	// could not tell: the most restricted agent.
	Unattributed Kind = "unattributed"
)

// Caller is who asks.
type Caller struct {
	Kind Kind
	// Scope, Profile and Workspace name an Agent's launch.
	Scope, Profile, Workspace string
	// Why says, for an Unattributed caller, why it is no launch's: an
	// enumeration of package peer (scope_not_launched, other_netns,
	// unknown_peer).
	Why string
	// Claimed is, for an Unattributed caller, the scope its group is
	// named like, or the launch whose network namespace it is in; ""
	// when there is none.
	Claimed string
	// Grant is an Agent's profile's spec.control; nil grants nothing.
	Grant *v1alpha1.ControlSpec
}

// IsUser reports whether c holds every right its uid gives.
func (c Caller) IsUser() bool { return c.Kind == User }

// Authorize returns nil when c may make a request of action, and a
// *Refusal otherwise. target is the workspace of a Run and the Consumer
// of a Consumer action, and ignored for the others.
func (c Caller) Authorize(action Action, target string) error {
	switch {
	case c.Kind == User, action == Read:
		return nil
	case c.Kind != Agent:
		return &Refusal{Caller: c, Action: action, Target: target}
	}
	var ok bool
	switch action {
	case Run:
		ok = target == c.Workspace || c.Grant.RunsInto(target)
	case Apply:
		ok = c.Grant.Allows(v1alpha1.ControlApply)
	case Delete:
		ok = c.Grant.Allows(v1alpha1.ControlDelete)
	case Stop:
		ok = c.Grant.Allows(v1alpha1.ControlStop)
	case Admin:
		ok = c.Grant.Allows(v1alpha1.ControlAdmin)
	case Consumer:
		ok = c.Grant.PresentsConsumer(target)
	}
	if ok {
		return nil
	}
	return &Refusal{Caller: c, Action: action, Target: target}
}

// ReasonControlRefused is the reason of the Warning event recorded on an
// agent's Workspace (or, for an unattributed caller, on the Profile its
// group is named for) when a request of it is refused.
const ReasonControlRefused = "ControlRefused"

// Refusal is a request refused to an agent. Its message names the
// agent's scope and the grant it lacks, and holds only names and
// enumerations.
type Refusal struct {
	Caller Caller
	Action Action
	Target string
}

func (r *Refusal) Error() string {
	return "an agent's request was refused: " + r.Who() + ": " + r.Missing() + "; " + r.outcome()
}

// Who names the agent that asked.
func (r *Refusal) Who() string {
	c := r.Caller
	if c.Kind == Agent {
		return fmt.Sprintf("the caller is in agent scope %s (profile %q, workspace %q)", c.Scope, c.Profile, c.Workspace)
	}
	where := "a process marshald cannot place"
	switch c.Why {
	case "scope_not_launched":
		where = "a scope marshald did not launch"
	case "other_netns":
		where = "the network namespace of an agent, or another than marshald's"
	}
	if c.Claimed != "" {
		where += " (" + c.Claimed + ")"
	}
	return "the caller is in " + where + ", which counts as the most restricted agent"
}

// Missing says what grant would allow the request.
func (r *Refusal) Missing() string {
	c := r.Caller
	if c.Kind != Agent {
		return fmt.Sprintf("%s is not granted to it: it may only read", r.what())
	}
	switch r.Action {
	case Run:
		return fmt.Sprintf("a run into workspace %q needs profile %q's spec.control.run to name %q", r.Target, c.Profile, r.Target)
	case Consumer:
		return fmt.Sprintf("presenting consumer %q's secret needs profile %q's spec.control.consumers to name %q", r.Target, c.Profile, r.Target)
	}
	return fmt.Sprintf("%s needs profile %q's spec.control.allow to hold %q", r.Action, c.Profile, r.grant())
}

func (r *Refusal) what() string {
	switch r.Action {
	case Run:
		return fmt.Sprintf("a run into workspace %q", r.Target)
	case Consumer:
		return fmt.Sprintf("presenting consumer %q's secret", r.Target)
	}
	return string(r.Action)
}

func (r *Refusal) grant() v1alpha1.ControlAction {
	return v1alpha1.ControlAction(r.Action)
}

func (r *Refusal) outcome() string {
	if r.Action == Run {
		return "nothing was started"
	}
	return "nothing was changed"
}
