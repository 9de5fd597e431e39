package controllers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// Condition reasons, which are also the reasons of the events that
// record their transitions.
const (
	// Profile Ready.
	ReasonSliceReady  = "SliceReady"
	ReasonSliceFailed = "SliceFailed"
	// Profile Enforced.
	ReasonLimitsEnforced   = "LimitsEnforced"
	ReasonLimitNotEnforced = "LimitNotEnforced"
	// Workspace Ready.
	ReasonWorkspaceReady   = "WorkspaceReady"
	ReasonRootMissing      = "RootMissing"
	ReasonRootNotDirectory = "RootNotDirectory"
	ReasonRootInaccessible = "RootInaccessible"
	ReasonProfileMissing   = "ProfileMissing"
	// ReasonProfileNotReady: the profile's slice cannot be made, so no
	// scope of it can be either.
	ReasonProfileNotReady = "ProfileNotReady"
	// Host Ready.
	ReasonProbed        = "Probed"
	ReasonProbeFailed   = "ProbeFailed"
	ReasonMeasureFailed = "MeasureFailed"
	// Consumer Ready.
	ReasonConsumerReady      = "ConsumerReady"
	ReasonConsumerIDConflict = "ConsumerIDConflict"
	ReasonCredentialReused   = "CredentialReused"
	// Invalid and Conflict, on every declared object.
	ReasonLoadFailed           = "LoadFailed"
	ReasonLoaded               = "Loaded"
	ReasonDuplicateDeclaration = "DuplicateDeclaration"
	ReasonConflictResolved     = "ConflictResolved"
	// Agent Orphaned.
	ReasonOrphaned = "Orphaned"
	// ReasonForeignScope: a scope under the naming contract that marshald
	// did not launch (an event on the Agent).
	ReasonForeignScope    = "ForeignScope"
	ReasonProfileDeclared = "ProfileDeclared"
)

// Reasons of the events on a Workspace about its agents.
const (
	// ReasonAgentStarted: an agent was launched (Normal).
	ReasonAgentStarted = "AgentStarted"
	// ReasonAgentExited: an agent's launch ended (Normal when it exited
	// with 0, else Warning).
	ReasonAgentExited = "AgentExited"
	// ReasonAgentOOMKilled: an agent's launch ended and the kernel
	// OOM-killed a process of its scope (Warning).
	ReasonAgentOOMKilled = "AgentOOMKilled"
	// ReasonLaunchRefused: a launch was refused (Warning).
	ReasonLaunchRefused = "LaunchRefused"
)

// ReasonStopped is the reason of the event recorded for each agent killed
// because its profile was deleted with orphans: stop.
const ReasonStopped = "Stopped"

// SetCondition returns conds with c set: added when conds has no condition
// of c's type, else replacing it. LastTransitionTime is kept when the
// status does not change, and otherwise set to c's when given, else to
// now; reason, message and observedGeneration are taken from c. changed
// reports whether the result differs from conds. conds itself is never
// modified: a change returns a new slice.
//
// It follows k8s.io/apimachinery's meta.SetStatusCondition, whose
// metav1.Condition type the API does not use.
func SetCondition(conds []v1alpha1.Condition, c v1alpha1.Condition, now time.Time) ([]v1alpha1.Condition, bool) {
	i := slices.IndexFunc(conds, func(x v1alpha1.Condition) bool { return x.Type == c.Type })
	if i < 0 {
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		return append(slices.Clip(conds), c), true
	}
	old := conds[i]
	switch {
	case old.Status != c.Status:
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
	default:
		c.LastTransitionTime = old.LastTransitionTime
	}
	if sameCondition(old, c) {
		return conds, false
	}
	out := slices.Clone(conds)
	out[i] = c
	return out, true
}

// sameCondition reports whether a and b say the same, at the same time.
func sameCondition(a, b v1alpha1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(b.LastTransitionTime)
}

// FindCondition returns the condition of type typ in conds, or nil.
func FindCondition(conds []v1alpha1.Condition, typ string) *v1alpha1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// setConditions sets st's observedGeneration and each of conds, stamped
// with gen, and returns the transitions that record an event: a condition
// whose status or reason changed, or a new one that is bad. A new
// condition that is good is the expected state, not news: a restart,
// which observes every object afresh, then records nothing for the
// objects that are fine.
func setConditions(st *v1alpha1.Status, gen int64, now time.Time, conds ...v1alpha1.Condition) []v1alpha1.Condition {
	st.ObservedGeneration = gen
	var transitions []v1alpha1.Condition
	for _, c := range conds {
		c.ObservedGeneration = gen
		old := FindCondition(st.Conditions, c.Type)
		if old == nil && !good(c) || old != nil && (old.Status != c.Status || old.Reason != c.Reason) {
			transitions = append(transitions, c)
		}
		st.Conditions, _ = SetCondition(st.Conditions, c, now)
	}
	return transitions
}

// good reports whether c says all is well: True for most types, False for
// those that name a problem.
func good(c v1alpha1.Condition) bool {
	switch c.Type {
	case v1alpha1.ConditionInvalid, v1alpha1.ConditionConflict, v1alpha1.ConditionOrphaned:
		return c.Status == v1alpha1.ConditionFalse
	}
	return c.Status == v1alpha1.ConditionTrue
}

// recorder records events. *events.Recorder is one.
type recorder interface {
	Normal(obj reconcile.Key, reason, message string)
	Warning(obj reconcile.Key, reason, message string)
}

// recordTransitions records one event per condition in transitions.
func recordTransitions(rec recorder, key reconcile.Key, transitions []v1alpha1.Condition) {
	for _, c := range transitions {
		msg := c.Message
		if msg == "" {
			msg = fmt.Sprintf("%s is %s", c.Type, c.Status)
		}
		if good(c) {
			rec.Normal(key, c.Reason, msg)
		} else {
			rec.Warning(key, c.Reason, msg)
		}
	}
}

// updateStatus applies a reconcile's view to the status under key: apply
// sets the fields and conditions the caller owns, leaving the rest (those
// other writers own) as they are, and returns the conditions that
// transitioned. The events of the transitions are recorded first, so that
// a reader who sees the new status finds its events too; then the store is
// updated atomically. One worker reconciles a key at a time, so apply sees
// the same value in both calls.
func updateStatus[T any](s *reconcile.Store[T], rec recorder, key reconcile.Key, apply func(*T) []v1alpha1.Condition) {
	cur, _ := s.Get(key)
	recordTransitions(rec, key, apply(&cur))
	s.Update(key, func(v T, _ bool) (T, bool) {
		apply(&v)
		return v, true
	})
}

// declConditions returns the Invalid and Conflict conditions that d says
// for an object whose current conditions are cur: True while the file
// fails to load (or another file declares the object too), False once it
// no longer does after having done so, and absent before.
func declConditions(d Declared, cur []v1alpha1.Condition) []v1alpha1.Condition {
	var out []v1alpha1.Condition
	switch {
	case len(d.Invalid) > 0:
		msg := d.Invalid[0]
		if n := len(d.Invalid) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more)", n)
		}
		out = append(out, v1alpha1.Condition{Type: v1alpha1.ConditionInvalid, Status: v1alpha1.ConditionTrue,
			Reason: ReasonLoadFailed, Message: msg})
	case FindCondition(cur, v1alpha1.ConditionInvalid) != nil:
		out = append(out, v1alpha1.Condition{Type: v1alpha1.ConditionInvalid, Status: v1alpha1.ConditionFalse,
			Reason: ReasonLoaded, Message: declaredAt(d) + " loads"})
	}
	switch {
	case len(d.Conflicts) > 0:
		out = append(out, v1alpha1.Condition{Type: v1alpha1.ConditionConflict, Status: v1alpha1.ConditionTrue,
			Reason: ReasonDuplicateDeclaration,
			Message: fmt.Sprintf("also declared at %s, ignored: %s wins",
				strings.Join(d.Conflicts, ", "), declaredAt(d))})
	case FindCondition(cur, v1alpha1.ConditionConflict) != nil:
		out = append(out, v1alpha1.Condition{Type: v1alpha1.ConditionConflict, Status: v1alpha1.ConditionFalse,
			Reason: ReasonConflictResolved, Message: "declared only at " + declaredAt(d)})
	}
	return out
}

// declaredAt returns "file:line", or "the manifest" when d has no file.
func declaredAt(d Declared) string {
	switch {
	case d.File == "":
		return "the manifest"
	case d.Line > 0:
		return fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	return d.File
}

// condition builds a condition of typ: True with reason okReason when ok,
// else False with badReason; msg is the message either way.
func condition(typ string, ok bool, okReason, badReason, msg string) v1alpha1.Condition {
	if ok {
		return v1alpha1.Condition{Type: typ, Status: v1alpha1.ConditionTrue, Reason: okReason, Message: msg}
	}
	return v1alpha1.Condition{Type: typ, Status: v1alpha1.ConditionFalse, Reason: badReason, Message: msg}
}
