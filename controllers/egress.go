package controllers

import (
	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Reasons of the EgressProxy condition of the Host, and of Ready on a
// Profile whose launches the proxy cannot serve.
const (
	// ReasonEgressListening: the proxy listens on its TCP address.
	ReasonEgressListening = "EgressListening"
	// ReasonEgressAddressInUse: another process holds the proxy's
	// address (EADDRINUSE).
	ReasonEgressAddressInUse = "EgressAddressInUse"
	// ReasonEgressListenFailed: listening failed otherwise (the errno is
	// in the message).
	ReasonEgressListenFailed = "EgressListenFailed"
	// ReasonEgressOff: marshald was started with --egress-address off.
	ReasonEgressOff = "EgressOff"
)

// EgressProxy is marshald's egress proxy as the host and profile
// controllers report it.
type EgressProxy interface {
	// TCP says whether the proxy listens where launches on the host's
	// network reach it. It does not change while the controllers run.
	TCP() EgressListener
}

// EgressListener is the state of the proxy's TCP listener.
type EgressListener struct {
	// Listening is true when the proxy listens on Address.
	Listening bool
	// Address is where it listens, or was to listen ("" when off).
	Address string
	// Reason is one of the ReasonEgress* codes.
	Reason string
	// Message says where and why, in marshald's own words ("not
	// listening on 127.0.0.1:4750: address in use"), and the fix.
	Message string
}

// egressCondition is the Host's EgressProxy condition, and false when
// there is no proxy to report on.
func (e *env) egressCondition() (v1alpha1.Condition, bool) {
	if e.egress == nil {
		return v1alpha1.Condition{}, false
	}
	l := e.egress.TCP()
	return condition(v1alpha1.ConditionEgressProxy, l.Listening, l.Reason, l.Reason, l.Message), true
}

// egressBlocks returns the TCP listener's state when launches of a
// profile of spec are refused for the proxy's lack: the profile declares
// egress, runs on the host's network (netns agents reach the proxy's
// unix socket, which marshald never runs without) and the proxy does not
// listen on TCP.
func (e *env) egressBlocks(spec v1alpha1.ProfileSpec) (EgressListener, bool) {
	if e.egress == nil || spec.Egress == nil || spec.Isolation == v1alpha1.IsolationNetns {
		return EgressListener{}, false
	}
	l := e.egress.TCP()
	return l, !l.Listening
}
