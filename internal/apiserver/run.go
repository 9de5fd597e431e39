package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/control"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
	peercred "github.com/marshal-dev/marshal/internal/peer"
)

// maxRunBody bounds a run request: argv and the caller's environment,
// which the kernel bounds to far less, base64-encoded.
const maxRunBody = 4 << 20

// run answers POST /v1/run: the caller, the process at the other end of
// the connection, is launched (the answer is its exec plan; it is inside
// its scope already), or refused before anything was started, or told
// what its launch would mean and need.
func (s *Server) run(w http.ResponseWriter, r *http.Request) error {
	// decode reads the whole body, so that the server notices at once
	// when the caller goes away: the request's context ends then.
	var req localapi.RunRequest
	if err := s.decode(w, r, &req, maxRunBody); err != nil {
		return err
	}
	if len(req.Argv) == 0 || req.TimeoutMS < 0 {
		return apiError(http.StatusBadRequest, localapi.CodeInvalid, "a run needs argv and a timeout that is not negative")
	}
	lreq := launch.Request{
		Workspace: req.Workspace, Argv: req.Argv, TTY: req.PTY,
		Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, Env: make([]string, len(req.Env)),
	}
	for i, kv := range req.Env {
		lreq.Env[i] = string(kv)
	}
	if req.Explain {
		if err := s.authorize(r, control.Read, ""); err != nil {
			return err
		}
		if conn, ok := peerConn(r.Context()); ok {
			if cred, err := peercred.Credentials(conn); err == nil {
				lreq.UID = cred.UID
			}
		}
		return s.explain(w, r, lreq)
	}
	conn, ok := peerConn(r.Context())
	if !ok {
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "a run is answered only on the unix socket")
	}
	if ref := s.judge(r, control.Run, req.Workspace); ref != nil {
		writeJSON(w, http.StatusOK, localapi.RunResult{Refusal: &localapi.Refusal{
			Code: localapi.RefusalForbidden, Detail: "an agent's request: " + ref.Who() + ": " + ref.Missing(),
			Process: callerPID(r.Context()), State: localapi.AttemptNotAsked,
		}})
		return nil
	}
	caller, err := launch.PinPeer(conn)
	if err != nil {
		s.log.Warn("run: the caller cannot be pinned", "err", err)
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "the caller cannot be pinned: it exited, or is not visible to marshald")
	}
	plan, err := s.d.Run(r.Context(), lreq, caller)
	if err != nil {
		return s.refuseRun(w, err)
	}
	p := &localapi.ExecPlan{
		Path: plan.Path, Argv: plan.Argv, Dir: plan.Dir, ID: plan.ID, Scope: plan.Scope,
		Attempt: plan.Attempt, Unaccounted: string(plan.Unaccounted), Env: make([][]byte, len(plan.Env)),
	}
	for i, kv := range plan.Env {
		p.Env[i] = []byte(kv)
	}
	writeJSON(w, http.StatusOK, localapi.RunResult{Plan: p})
	return nil
}

// refuseRun answers a refusal, or an internal error that is not one.
func (s *Server) refuseRun(w http.ResponseWriter, err error) error {
	var ref *launch.Refusal
	if !errors.As(err, &ref) {
		return internalError("the run failed; see marshald's log", err)
	}
	if ref.Code == launch.CodeInternal || ref.Code == launch.CodeAdmissionUnknown {
		s.log.Warn("run refused", "code", ref.Code, "attempt", ref.Attempt, "pid", ref.PID, "state", ref.State, "err", err)
	}
	writeJSON(w, http.StatusOK, localapi.RunResult{Refusal: refusalOf(ref)})
	return nil
}

// refusalCodes and attemptStates map the launch path's codes and states
// to the wire's; what is not here is INTERNAL and unknown.
var (
	refusalCodes = map[launch.Code]string{
		launch.CodeWorkspaceNotReady:    localapi.RefusalWorkspaceNotReady,
		launch.CodeExecNotAllowed:       localapi.RefusalExecNotAllowed,
		launch.CodeWorkspaceBusy:        localapi.RefusalWorkspaceBusy,
		launch.CodeResourceUnavailable:  localapi.RefusalResourceUnavailable,
		launch.CodePolicyUnsupported:    localapi.RefusalPolicyUnsupported,
		launch.CodeAuthorityUnavailable: localapi.RefusalAuthorityUnavailable,
		launch.CodeAdmissionUnknown:     localapi.RefusalAdmissionUnknown,
		launch.CodeIsolationUnsupported: localapi.RefusalIsolationUnsupported,
		launch.CodeEgressUnavailable:    localapi.RefusalEgressUnavailable,
		launch.CodeInternal:             localapi.RefusalInternal,
	}
	attemptStates = map[launch.State]string{
		launch.StateNotAsked:    localapi.AttemptNotAsked,
		launch.StateNotRecorded: localapi.AttemptNotRecorded,
		launch.StateDenied:      localapi.AttemptDenied,
		launch.StateCancelled:   localapi.AttemptCancelled,
		launch.StateExpired:     localapi.AttemptExpired,
		launch.StateUnknown:     localapi.AttemptUnknown,
	}
)

// refusalOf is a refusal as the API says it. Its cause stays in the log.
func refusalOf(r *launch.Refusal) *localapi.Refusal {
	code, ok := refusalCodes[r.Code]
	if !ok {
		code = localapi.RefusalInternal
	}
	state, ok := attemptStates[r.State]
	if !ok {
		state = localapi.AttemptUnknown
	}
	return &localapi.Refusal{Code: code, Detail: r.Detail, Attempt: r.Attempt, Process: r.PID, State: state}
}

// explain answers what a run would mean and need.
func (s *Server) explain(w http.ResponseWriter, r *http.Request, req launch.Request) error {
	e, err := s.d.Explain(r.Context(), req)
	if errors.Is(err, launch.ErrNotRunning) {
		return apiError(http.StatusServiceUnavailable, localapi.CodeUnavailable, "marshald is starting")
	}
	if err != nil {
		return s.refuseRun(w, err)
	}
	meaning, err := json.Marshal(e.Meaning)
	if err != nil {
		return s.refuseRun(w, err)
	}
	a := localapi.ExplainAdmission{
		Participation: string(e.Participation),
		Request:       e.Intent.Requested.Amounts(),
		Minimum: map[string]string{
			string(cgroup.CPU): string(e.Intent.Minimum.CPU), string(cgroup.Memory): string(e.Intent.Minimum.Memory),
			string(cgroup.PIDs): string(e.Intent.Minimum.PIDs),
		},
		Supported: e.Supported, Unsupported: e.Unsupported, Ready: e.Ready,
		Free: e.Free.Amounts(), Target: e.Target.Amounts(), Fits: e.Fits, Shortage: e.Shortage,
		Limits: v1alpha1.Amounts{CPUMilli: e.Limits.CPUMilli, MemoryBytes: e.Limits.MemoryBytes, Tasks: e.Limits.Tasks},
	}
	if e.Plan != nil {
		for _, r := range cgroup.AllResources {
			a.Host = append(a.Host, e.Plan.Get(r).Of(r))
		}
	}
	writeJSON(w, http.StatusOK, localapi.RunResult{Explain: &localapi.Explain{Meaning: meaning, Digest: e.Digest, Admission: a}})
	return nil
}

// backup answers GET /v1/admin/backup: a consistent copy of the
// admission journal, with its length, so that a copy cut short is
// refused by the client rather than saved.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) error {
	const failed = "the backup failed; marshald's log has the cause"
	f, err := s.d.Backup(r.Context())
	if err != nil {
		return internalError(failed, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return internalError(failed, err)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "admission.db", st.ModTime(), f)
	return nil
}

// metrics answers GET /metrics with Options.Metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	s.opts.Metrics.ServeHTTP(w, r)
	return nil
}
