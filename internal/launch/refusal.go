package launch

import (
	"fmt"
)

// Code says why a launch was refused.
type Code string

// Refusal codes.
const (
	// CodeWorkspaceNotReady: the workspace is not declared, not Ready, or
	// its root is not a directory.
	CodeWorkspaceNotReady Code = "WORKSPACE_NOT_READY"
	// CodeExecNotAllowed: the workspace does not allow exec, argv[0] is
	// not on its list, or argv[0] does not resolve to an executable.
	CodeExecNotAllowed Code = "EXEC_NOT_ALLOWED"
	// CodeWorkspaceBusy: every live-process slot of the workspace is held.
	CodeWorkspaceBusy Code = "WORKSPACE_BUSY"
	// CodeResourceUnavailable: the request does not fit what the
	// authority has free, or the prepared attempt expired.
	CodeResourceUnavailable Code = "RESOURCE_UNAVAILABLE"
	// CodePolicyUnsupported: a minimum level is above what this host
	// gives.
	CodePolicyUnsupported Code = "RESOURCE_POLICY_UNSUPPORTED"
	// CodeAuthorityUnavailable: the authority cannot decide (closed, not
	// ready, journal failed).
	CodeAuthorityUnavailable Code = "RESOURCE_AUTHORITY_UNAVAILABLE"
	// CodeAdmissionUnknown: the authority's answer was lost and one
	// lookup did not settle it.
	CodeAdmissionUnknown Code = "ADMISSION_UNKNOWN"
	// CodeIsolationUnsupported: the profile's isolation (netns, or the
	// workspace's network policy none) cannot be had on this host.
	CodeIsolationUnsupported Code = "ISOLATION_UNSUPPORTED"
	// CodeEgressUnavailable: the profile declares egress and the proxy
	// does not listen where the launch would reach it.
	CodeEgressUnavailable Code = "EGRESS_UNAVAILABLE"
	// CodeInternal: anything else: a digest mismatch, a scope that could
	// not be created or bound.
	CodeInternal Code = "INTERNAL"
)

// State is what became of a refused launch's attempt.
type State string

// Attempt states of a refusal.
const (
	// StateNotAsked: the authority was not asked (refused before
	// admission, or the workspace does not participate).
	StateNotAsked State = "not_asked"
	// StateNotRecorded: the authority answered with an error: nothing
	// was recorded.
	StateNotRecorded State = "not_recorded"
	// StateDenied: the authority denied the attempt.
	StateDenied State = "denied"
	// StateCancelled: the attempt was admitted, then cancelled (or is
	// draining until its scope ends).
	StateCancelled State = "cancelled"
	// StateExpired: the attempt's deadline passed before its launch.
	StateExpired State = "expired"
	// StateUnknown: what the authority did is not known.
	StateUnknown State = "unknown"
)

// Details of refusals: fixed phrases, completed with numbers only. No
// free text from the authority or the system reaches a refusal.
const (
	detailNotDeclared      = "workspace not declared"
	detailNotReady         = "workspace not ready"
	detailRootMissing      = "workspace root is not a directory"
	detailExecNotAllowed   = "exec not allowed"
	detailArgv0NotAllowed  = "argv0 not allowed"
	detailNotFound         = "executable not found"
	detailNotUTF8          = "argv or environment change not utf-8"
	detailBusy             = "live process limit reached"
	detailExpired          = "prepared attempt expired"
	detailDigestMismatch   = "digest mismatch"
	detailAuthority        = "admission authority unavailable"
	detailUnknown          = "admission outcome unknown"
	detailRecordFailed     = "launch record not written"
	detailScopeFailed      = "scope not created"
	detailCallerGone       = "caller exited"
	detailBindFailed       = "scope not bound"
	detailRunNotAuthorized = "run not authorized"
	detailNotRunning       = "launcher not running"
	detailAttemptConflict  = "attempt conflict"
	detailNoPermit         = "launch not begun"
	detailNoEgressProxy    = "egress proxy not listening"
	detailIsolation        = "netns isolation unavailable"
	detailNetwork          = "network not given"
)

// Refusal is a launch refused before anything was started: the error
// Prepare and Launch return. Its fields are enumerations, identifiers
// and numbers only.
type Refusal struct {
	Code Code
	// Detail says more, in a fixed phrase and numbers: "live process
	// limit reached (8 of 8)", "memory_bytes requested 536870912, free
	// 268435456 of 1073741824".
	Detail string
	// Attempt is the attempt's ID, "" when none was made.
	Attempt string
	// PID is the caller's process ID.
	PID int
	// State is what became of the attempt.
	State State

	cause error
}

func (r *Refusal) Error() string {
	msg := fmt.Sprintf("%s: %s (attempt %s, process %d, state %s)", r.Code, r.Detail, orDash(r.Attempt), r.PID, r.State)
	if r.cause != nil {
		msg += ": " + r.cause.Error()
	}
	return msg
}

// Unwrap returns the cause, for errors.Is and for logs; it is never shown
// to the caller.
func (r *Refusal) Unwrap() error { return r.cause }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Unaccounted says why an execution of an optional workspace runs without
// a reservation.
type Unaccounted string

// Reasons an execution runs unaccounted.
const (
	UnaccountedResourceUnavailable  Unaccounted = "resource_unavailable"
	UnaccountedPolicyUnsupported    Unaccounted = "resource_policy_unsupported"
	UnaccountedAuthorityUnavailable Unaccounted = "authority_unavailable"
	UnaccountedAdmissionUnknown     Unaccounted = "admission_unknown"
)
