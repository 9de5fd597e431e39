package apiserver

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/marshal-dev/marshal/internal/control"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Control attributes every caller to the user or an agent, and is told
// of every judgement made of an agent's request. marshald implements it
// from the peer's cgroup and its profile's spec.control.
type Control interface {
	// Caller says who the process at the other end of c is. It is asked
	// once per connection, when it is accepted.
	Caller(c *net.UnixConn) control.Caller
	// Judged is told that a request of action by c was allowed (refusal
	// nil) or refused, before anything of it was done. It must not block.
	Judged(c control.Caller, action control.Action, refusal *control.Refusal)
}

// callerOf returns the caller of a request's connection; the user when
// the server has no Control.
func callerOf(ctx context.Context) control.Caller {
	if p, _ := ctx.Value(peerKey{}).(*peer); p != nil {
		return p.caller
	}
	return control.Caller{Kind: control.Unattributed}
}

// callerPID returns the pid of a request's peer, 0 when not known.
func callerPID(ctx context.Context) int {
	if p, _ := ctx.Value(peerKey{}).(*peer); p != nil {
		return p.pid
	}
	return 0
}

// judge decides a request of action (on target) by the request's
// caller, tells Control, and returns the refusal, or nil.
func (s *Server) judge(r *http.Request, action control.Action, target string) *control.Refusal {
	c := callerOf(r.Context())
	var ref *control.Refusal
	if err := c.Authorize(action, target); err != nil && !errors.As(err, &ref) {
		ref = &control.Refusal{Caller: c, Action: action, Target: target}
	}
	if s.opts.Control != nil && !c.IsUser() {
		s.opts.Control.Judged(c, action, ref)
	}
	return ref
}

// authorize is judge as an error the handler answers: 403 FORBIDDEN with
// the refusal's message.
func (s *Server) authorize(r *http.Request, action control.Action, target string) error {
	if ref := s.judge(r, action, target); ref != nil {
		return apiError(http.StatusForbidden, localapi.CodeForbidden, "%s", ref.Error())
	}
	return nil
}

// as answers a request with h once its caller may make a request of
// action.
func (s *Server) as(action control.Action, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.authorize(r, action, ""); err != nil {
			return err
		}
		return h(w, r)
	}
}
