package launch

import "errors"

// Errors of the launch path. A refusal (*Refusal) wraps one of them, or
// an error of the authority or the backend, as its cause.
var (
	// ErrConsumed is returned by PreparedExecution.Launch and Cancel when
	// the prepared execution was launched, cancelled or dropped before: it
	// is used once.
	ErrConsumed = errors.New("launch: prepared execution already used")
	// ErrDigestMismatch is the cause of the refusal of a Launch asked for
	// another execution (argv, workspace, terminal, timeout or
	// environment) than the one prepared.
	ErrDigestMismatch = errors.New("launch: execution differs from the one prepared")
	// ErrExpired is the cause of the refusal of a Launch whose prepared
	// attempt reached its deadline first.
	ErrExpired = errors.New("launch: prepared execution expired")
	// ErrWorkspaceBusy is returned by Slots.Reserve, and is the cause of
	// the refusal, when every live-process slot of the workspace is held.
	ErrWorkspaceBusy = errors.New("launch: live process limit reached")
	// ErrNotAuthorized is the cause of the refusal of a request the
	// workspace's policy does not allow, or a workspace that is not
	// declared or not Ready.
	ErrNotAuthorized = errors.New("launch: not authorized")
	// ErrAdmissionUnknown is the cause of the refusal of a request whose
	// admission answer was lost and could not be settled by one lookup.
	ErrAdmissionUnknown = errors.New("launch: admission outcome unknown")
	// ErrNotRunning is returned when the Launcher has not registered with
	// the authority yet (Run has not got that far) or has stopped.
	ErrNotRunning = errors.New("launch: launcher not running")
	// ErrProcessGone is returned by Pin and PinPeer when the process has
	// exited, or its pid now names another process.
	ErrProcessGone = errors.New("launch: process gone")
	// ErrClaimed is returned when a launch of the attempt is made or
	// being made already: another helper claimed its grant.
	ErrClaimed = errors.New("launch: attempt's launch claimed")
	// ErrNotOwnersChild is returned by LaunchHelper when the helper is not
	// a live child of the attempt's owner, of the owner's uid.
	ErrNotOwnersChild = errors.New("launch: helper is not the owner's child")
	// ErrUnknownLaunch is returned by Observe and Signal when no launch
	// of the attempt is known: it made no scope, or ended.
	ErrUnknownLaunch = errors.New("launch: launch not known")
	// ErrIsolationNotGiven is the cause of the refusal of a launch
	// helper's launch under a profile with netns isolation or filesystem
	// rules, which the helper does not give.
	ErrIsolationNotGiven = errors.New("launch: netns isolation and filesystem confinement are not given to a launch helper's program")
	// ErrNoEgressProxy is what Options.Network returns, and the cause of
	// the refusal, when a profile's egress proxy cannot be offered: the
	// proxy does not listen where the launch would reach it.
	ErrNoEgressProxy = errors.New("launch: egress proxy not listening")
	// ErrInvalidOptions is returned by New when a required option is
	// missing.
	ErrInvalidOptions = errors.New("launch: invalid options")
)

// EgressUnavailableError is an ErrNoEgressProxy that says why: Cause is
// marshald's own account (the address and the errno's name, "not
// listening on 127.0.0.1:4750: address in use"), shown in the refusal;
// Fix names what to change.
type EgressUnavailableError struct {
	Cause, Fix string
}

func (e *EgressUnavailableError) Error() string {
	return "launch: egress proxy " + e.Cause + "; " + e.Fix
}

// Unwrap makes the error an ErrNoEgressProxy.
func (e *EgressUnavailableError) Unwrap() error { return ErrNoEgressProxy }
