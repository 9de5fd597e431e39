package launch

import (
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/cgroup"
)

// Explanation is what a launch would mean and what its admission would
// need, found without admitting or running anything.
type Explanation struct {
	// Meaning is the execution's meaning, and Digest the digest the
	// authority would bind its attempt to.
	Meaning admission.ExecutionMeaning
	Digest  string
	// Participation is the workspace's; admission is asked only when it
	// is required or optional.
	Participation v1alpha1.Participation
	// Intent is what each execution reserves.
	Intent admission.Intent
	// Plan is, per resource, the level and method this host gives; nil
	// until the host was probed.
	Plan *admission.Plan
	// Supported reports whether the plan gives every minimum level;
	// Unsupported names the first that it does not.
	Supported   bool
	Unsupported string
	// Ready reports whether the authority can decide now.
	Ready bool
	// Free and Target are what the authority has free now, of what it
	// admits against.
	Free   admission.Budget
	Target admission.Budget
	// Fits reports whether the request fits what is free now; Shortage
	// names the first resource that does not.
	Fits     bool
	Shortage string
	// Limits are the scope limits a launch admitted now would get.
	Limits cgroup.Limits
}

// Explain resolves req in its workspace as Prepare would, and says what
// it would mean and need; it reserves no slot, admits nothing and runs
// nothing. A request Prepare would refuse before admission is refused the
// same way (a *Refusal).
func (l *Launcher) Explain(req Request) (Explanation, error) {
	w, ready, ok := l.workspaces.Workspace(req.Workspace)
	switch {
	case !ok:
		return Explanation{}, &Refusal{Code: CodeWorkspaceNotReady, Detail: detailNotDeclared, State: StateNotAsked, cause: ErrNotAuthorized}
	case !ready:
		return Explanation{}, &Refusal{Code: CodeWorkspaceNotReady, Detail: detailNotReady, State: StateNotAsked, cause: ErrNotAuthorized}
	}
	net, ref := l.networkOf(w, req.UID)
	if ref != nil {
		return Explanation{}, ref
	}
	x, ref := resolve(w, req, net)
	if ref != nil {
		return Explanation{}, ref
	}
	digest, ref := x.digest()
	if ref != nil {
		return Explanation{}, ref
	}
	s := l.auth.Snapshot()
	e := Explanation{
		Meaning: x.Meaning(), Digest: digest, Participation: x.Participation, Intent: x.Intent,
		Plan: s.Plan, Ready: s.Ready, Free: s.Free, Target: s.Target,
		Supported: s.Plan != nil && s.Plan.Satisfies(x.Intent.Minimum),
		Fits:      x.Intent.Requested.Fits(s.Free),
	}
	if !e.Supported {
		e.Unsupported = unsupported(x.Intent.Minimum, s.Plan)
	}
	if !e.Fits {
		e.Shortage = shortage(x.Intent.Requested, s, l.clock.Now())
	}
	if s.Plan != nil && (x.Participation == v1alpha1.ParticipationRequired || x.Participation == v1alpha1.ParticipationOptional) {
		e.Limits = planLimits(s.Plan.For(x.Intent.Minimum), x.Intent.Requested)
	}
	return e, nil
}
