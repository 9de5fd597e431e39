package devguardwire

import (
	"context"
	"errors"
	"net"
	"slices"
	"syscall"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/control"
	"github.com/marshal-dev/marshal/internal/launch"
)

// Code is an error code of DevGuard's wire.
type Code string

// The codes of protocol 1.
const (
	CodeUnauthorized               Code = "unauthorized"
	CodeInvalidRequest             Code = "invalid_request"
	CodeAttemptConflict            Code = "attempt_conflict"
	CodeResourceUnavailable        Code = "resource_unavailable"
	CodeResourceControlUnavailable Code = "resource_control_unavailable"
	CodeResourcePolicyUnsupported  Code = "resource_policy_unsupported"
	CodeInvalidTransition          Code = "invalid_transition"
	CodeNotFound                   Code = "not_found"
	CodeReconciliationRequired     Code = "reconciliation_required"
	CodeJournalInvalid             Code = "journal_invalid"
)

// wireError is an error answer: a code and a fixed message of this
// package, never text from anywhere else.
type wireError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func failure(code Code, message string) *wireError { return &wireError{code, message} }

// Errors the session answers itself.
var (
	errNotGreeted     = failure(CodeUnauthorized, "hello comes first")
	errNotAuthorized  = failure(CodeUnauthorized, "caller credential, role or instance is not authorized")
	errHelperOnly     = failure(CodeUnauthorized, "a helper session makes no other request")
	errGreetedTwice   = failure(CodeInvalidTransition, "session already negotiated")
	errAuthedTwice    = failure(CodeInvalidTransition, "session already authenticated")
	errRegisteredOnce = failure(CodeInvalidTransition, "this session already registered its instance")
	errIncompatible   = failure(CodeResourcePolicyUnsupported, "protocol or required capability mismatch")
	errVersion        = failure(CodeResourcePolicyUnsupported, "unsupported wire version or request identity")
	errNoLeases       = failure(CodeResourcePolicyUnsupported, "parent leases are not offered")
	errBadID          = failure(CodeInvalidRequest, "identifier must contain 1..128 safe ASCII characters")
	errBadDigest      = failure(CodeInvalidRequest, "expected a lowercase SHA-256 digest")
	errBadQuantity    = failure(CodeInvalidRequest, "workload quantities must be positive")
)

// errorOf maps what the Daemon returned onto DevGuard's codes. Every
// answer but resource_control_unavailable is definite: the authority
// answers each request after its journal transaction, and an error
// changed nothing. resource_control_unavailable is the one CodeSpace
// takes as unknown and follows with a lookup, so it is kept for when the
// authority cannot say: not ready, stopping, or an error nothing here
// knows.
func errorOf(err error) *wireError {
	switch {
	case errors.Is(err, admission.ErrInvalidRequest):
		return failure(CodeInvalidRequest, "the request is not valid")
	case errors.Is(err, admission.ErrUnauthorized), errors.Is(err, launch.ErrNotOwnersChild):
		return errNotAuthorized
	case errors.Is(err, admission.ErrNotFound):
		return failure(CodeNotFound, "execution attempt not found")
	case errors.Is(err, admission.ErrAttemptConflict):
		return failure(CodeAttemptConflict, "attempt or instance identity has a different meaning or owner")
	case errors.Is(err, admission.ErrInvalidTransition), errors.Is(err, launch.ErrClaimed):
		return failure(CodeInvalidTransition, "execution phase does not allow this transition")
	case errors.Is(err, admission.ErrInstancesFull):
		return failure(CodeResourceUnavailable, "consumer instance pool is occupied")
	case errors.Is(err, admission.ErrJournalFailed):
		// Nothing was recorded: the journal refused the commit (a full
		// disk), and the request may be made again later.
		return failure(CodeResourceUnavailable, "the journal could not record the request; nothing changed")
	case errors.Is(err, admission.ErrEvidence):
		return failure(CodeResourcePolicyUnsupported, "scope binding or applied policy was not verified")
	case errors.Is(err, launch.ErrIsolationNotGiven):
		// Definite: nothing was made, and the attempt is still the
		// owner's to abandon.
		return failure(CodeResourcePolicyUnsupported, "the profile's netns isolation or filesystem confinement is not given to a launch helper")
	}
	return failure(CodeResourceControlUnavailable, "resource control is unavailable; the outcome is not known")
}

// session is what one session has established.
type session struct {
	// caller is who the peer is to the control plane.
	caller  control.Caller
	greeted bool
	role    admission.Role
	// admin is set once the administrator authenticated.
	admin bool
	// consumer and generation are the authenticated consumer's.
	consumer, generation string
	principal            admission.Principal
	registered           bool
	// helper is set once the session presented a launch: it makes no
	// other request.
	helper bool
}

func (st *session) authenticated() bool { return st.role != "" || st.admin }

// answer is a request's answer: result names the variant of value.
type answer struct {
	result string
	value  any
	err    *wireError
}

func fail(e *wireError) answer { return answer{err: e} }

// handle answers one request, in DevGuard's order of checks.
func (s *Server) handle(ctx context.Context, st *session, r *Request, caller admission.Peer, conn *net.UnixConn) answer {
	if st.helper {
		return fail(errHelperOnly)
	}
	switch r.Method {
	case MethodHello:
		return s.hello(st, r.Compatibility, caller)
	case MethodAuthenticate:
		return s.authenticate(st, r.Credential)
	case MethodStatus:
		if !st.authenticated() {
			return fail(errNotAuthorized)
		}
		return answer{result: "status", value: statusOf(s.d.Status())}
	case MethodRegister:
		return s.register(ctx, st, r.InstanceID, caller)
	case MethodLaunch:
		return s.launch(ctx, st, r, conn)
	case MethodAdmitLease, MethodAdmitChild, MethodEndLease, MethodLeaseStatus:
		return fail(errNoLeases)
	}
	// Every other request acts for the instance registered in this
	// session, on a key of its consumer.
	if !st.registered {
		return fail(errNotAuthorized)
	}
	key := r.Key
	if r.Method == MethodAdmit {
		key = r.Admission.Key
	}
	if e := s.checkKey(st, key); e != nil {
		return fail(e)
	}
	k := admission.AttemptKey(key)
	switch r.Method {
	case MethodAdmit:
		a := r.Admission
		if !v1alpha1.IsDigest(a.ExecutionDigest) {
			return fail(errBadDigest)
		}
		if !v1alpha1.IsIdentifier(a.Intent.Profile) {
			return fail(errBadID)
		}
		if q := a.Intent.Requested; q.CPUMilli == 0 || q.MemoryBytes == 0 || q.Tasks == 0 {
			return fail(errBadQuantity)
		}
		in := admission.Intent{
			Profile:   a.Intent.Profile,
			Requested: admission.Budget(a.Intent.Requested),
			Minimum: admission.Levels{
				CPU: v1alpha1.Level(a.Intent.Minimum.CPU), Memory: v1alpha1.Level(a.Intent.Minimum.Memory),
				PIDs: v1alpha1.Level(a.Intent.Minimum.PIDs),
			},
		}
		return s.attempt(s.d.Admit(ctx, st.principal, k, a.ExecutionDigest, in))
	case MethodBeginLaunch:
		l, err := s.d.BeginLaunch(ctx, st.principal, k)
		if err != nil {
			return fail(errorOf(err))
		}
		rec, err := recordOf(l.Record)
		if err != nil {
			return fail(errorOf(err))
		}
		grant := launchGrant{Attempt: rec}
		if !l.Permit.IsZero() {
			p := l.Permit.Expose()
			grant.Permit = &p
		}
		return answer{result: "launch_granted", value: grant}
	case MethodLookup:
		return s.attempt(s.d.Lookup(ctx, st.principal, k))
	case MethodCancel:
		return s.attempt(s.d.Cancel(ctx, st.principal, k))
	case MethodAbandonLaunch:
		return s.attempt(s.d.AbandonLaunch(ctx, st.principal, k, admission.AbandonReason(r.Reason)))
	case MethodObserve:
		return s.attempt(s.d.Observe(ctx, st.principal, k))
	case MethodTerminate:
		rec, t, err := s.d.Terminate(ctx, st.principal, k, signalOf(r.Signal))
		if err != nil {
			return fail(errorOf(err))
		}
		wr, err := recordOf(rec)
		if err != nil {
			return fail(errorOf(err))
		}
		return answer{result: "terminated", value: termination{Attempt: wr, Signalled: uint32(t.Signalled), Complete: t.Complete}}
	}
	return fail(errorOf(nil))
}

// checkKey checks a key as DevGuard does before anything is looked up:
// its identifiers, then that it is of the session's consumer and
// generation.
func (s *Server) checkKey(st *session, k Key) *wireError {
	if !v1alpha1.IsIdentifier(k.ConsumerID) || !v1alpha1.IsIdentifier(k.ConsumerGeneration) || !v1alpha1.IsIdentifier(k.AttemptID) {
		return errBadID
	}
	if k.ConsumerID != st.consumer || k.ConsumerGeneration != st.generation {
		return errNotAuthorized
	}
	return nil
}

func (s *Server) attempt(r admission.Record, err error) answer {
	if err != nil {
		return fail(errorOf(err))
	}
	rec, err := recordOf(r)
	if err != nil {
		return fail(errorOf(err))
	}
	return answer{result: "attempt", value: rec}
}

// hello negotiates protocol 1. The capabilities stated are those every
// session gets and the Daemon's own; one added after protocol 1
// (parent_lease, upgrade_drain) is never stated, for this authority
// implements none of them.
func (s *Server) hello(st *session, c Compatibility, caller admission.Peer) answer {
	if st.greeted {
		return fail(errGreetedTwice)
	}
	caps := s.capabilities()
	if c.MinimumProtocol > c.MaximumProtocol || Protocol < c.MinimumProtocol || Protocol > c.MaximumProtocol {
		return fail(errIncompatible)
	}
	for _, want := range c.Required {
		if !slices.Contains(caps, want) {
			return fail(errIncompatible)
		}
	}
	st.greeted = true
	return answer{result: "hello", value: hello{
		Protocol:        Protocol,
		Authority:       peerID{UID: s.uid, PID: uint32(s.pid)},
		Caller:          peerID{UID: caller.UID, PID: uint32(caller.PID)},
		Capabilities:    caps,
		MaxFrameBytes:   MaxFrameBytes,
		FrameDeadlineMS: uint64(FrameDeadline.Milliseconds()),
		MaxSessions:     MaxSessions,
	}}
}

// baseCapabilities are stated by every session: this authority keeps a
// durable journal, fences launches, reports evidence per resource and
// takes consumers' static control reservations off its capacity.
var baseCapabilities = []Capability{CapDurableAdmission, CapFencedLaunch, CapPerResourceEvidence, CapStaticControlReservations}

// capabilities lists what is stated, in DevGuard's order.
func (s *Server) capabilities() []Capability {
	out := slices.Clone(baseCapabilities)
	for _, c := range s.d.Capabilities() {
		if c == CapLinuxCgroupV2 && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Capability) int { return slices.Index(capabilities, a) - slices.Index(capabilities, b) })
	return out
}

func (s *Server) authenticate(st *session, c Credential) answer {
	if !st.greeted {
		return fail(errNotGreeted)
	}
	if st.authenticated() {
		return fail(errAuthedTwice)
	}
	switch c.Kind {
	case CredentialConsumer:
		if !v1alpha1.IsIdentifier(c.ConsumerID) || !v1alpha1.IsIdentifier(c.Generation) {
			return fail(errBadID)
		}
		if !s.allows(st, control.Consumer, c.ConsumerID) {
			return fail(errNotAuthorized)
		}
		role, err := s.d.AuthenticateConsumer(c.ConsumerID, c.Generation, c.Secret)
		if err != nil {
			return fail(errorOf(err))
		}
		st.role, st.consumer, st.generation = role, c.ConsumerID, c.Generation
		return answer{result: "authenticated", value: authenticated{Role: string(role)}}
	case CredentialAdministrator:
		if !s.allows(st, control.Admin, "") {
			return fail(errNotAuthorized)
		}
		if err := s.d.AuthenticateAdministrator(c.Secret); err != nil {
			return fail(errorOf(err))
		}
		st.admin = true
		return answer{result: "authenticated", value: authenticated{Role: "administrator"}}
	}
	return fail(errNotAuthorized)
}

// allows reports whether the session's caller may present a credential
// of action (on target), and tells Control of an agent's judgement.
func (s *Server) allows(st *session, action control.Action, target string) bool {
	err := st.caller.Authorize(action, target)
	var ref *control.Refusal
	if err != nil && !errors.As(err, &ref) {
		ref = &control.Refusal{Caller: st.caller, Action: action, Target: target}
	}
	if s.control != nil && !st.caller.IsUser() {
		s.control.Judged(st.caller, action, ref)
	}
	return ref == nil
}

func (s *Server) register(ctx context.Context, st *session, instance string, caller admission.Peer) answer {
	if !v1alpha1.IsIdentifier(instance) {
		return fail(errBadID)
	}
	if st.consumer == "" {
		return fail(errNotAuthorized)
	}
	if st.registered {
		return fail(errRegisteredOnce)
	}
	p, err := s.d.Register(ctx, st.consumer, st.generation, instance, caller)
	if err != nil {
		return fail(errorOf(err))
	}
	in, _ := p.Instance()
	st.principal, st.registered = p, true
	return answer{result: "registered", value: registered{Instance: instanceOf(in)}}
}

// launch is a helper's presentation of its owner's grant. The session is
// a helper's from then on, whatever the answer.
func (s *Server) launch(ctx context.Context, st *session, r *Request, conn *net.UnixConn) answer {
	if !st.greeted || st.authenticated() {
		return fail(errNotAuthorized)
	}
	st.helper = true
	k := r.Key
	if !v1alpha1.IsIdentifier(k.ConsumerID) || !v1alpha1.IsIdentifier(k.ConsumerGeneration) ||
		!v1alpha1.IsIdentifier(k.AttemptID) || !v1alpha1.IsIdentifier(r.InstanceID) {
		return fail(errBadID)
	}
	owner, ok := s.d.Registered(k.ConsumerID, k.ConsumerGeneration, r.InstanceID)
	if !ok {
		return fail(errNotAuthorized)
	}
	permit, err := admission.ParsePermit(r.Permit.Expose())
	if err != nil {
		return fail(errNotAuthorized)
	}
	// The helper is pinned by a pidfd before anything is asked of it, so
	// that a pid reused since it connected is never taken for it.
	helper, err := launch.PinPeer(conn)
	if err != nil {
		return fail(errNotAuthorized)
	}
	run, err := s.d.Launch(ctx, owner, admission.AttemptKey(k), permit, helper)
	if err != nil {
		return fail(errorOf(err))
	}
	rec, err := recordOf(run.Record)
	if err != nil {
		return fail(errorOf(err))
	}
	return answer{result: "launch_authorized", value: launchAuthorization{Attempt: rec, MayExec: run.MayExec}}
}

func signalOf(s Signal) syscall.Signal {
	switch s {
	case SignalInterrupt:
		return syscall.SIGINT
	case SignalHangup:
		return syscall.SIGHUP
	case SignalTerminate:
		return syscall.SIGTERM
	}
	return syscall.SIGKILL
}
