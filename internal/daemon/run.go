package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// maxRunBody bounds a run request: argv and the caller's environment.
const maxRunBody = 4 << 20

// newLauncher makes the launch path over the daemon's parts. It tells the
// controllers, once they exist, about launches they cannot see in the
// tree.
func (d *Daemon) newLauncher(mount string) error {
	var err error
	d.launcher, err = launch.New(launch.Options{
		Authority:   d.auth,
		Scopes:      d.backend,
		Store:       launch.FileStore{Dir: filepath.Join(d.cfg.StateDir, "launches"), DB: d.db},
		Workspaces:  workspaceIndex{d.stores},
		CgroupMount: mount,
		Metrics:     launchMetrics{d},
		Clock:       d.clock,
		OnScope: func(scope string) {
			if d.manager != nil {
				d.manager.EnqueueAgent(scope)
			}
		},
		OnWorkspace: func(workspace string) {
			if d.manager != nil {
				d.manager.EnqueueWorkspace(workspace)
			}
		},
		Logger: d.log.With("component", "launch"),
	})
	return err
}

// workspaceIndex finds declared workspaces and their readiness in the
// stores.
type workspaceIndex struct{ s *controllers.Stores }

func (x workspaceIndex) Workspace(name string) (*v1alpha1.Workspace, bool, bool) {
	key := controllers.WorkspaceKey(name)
	obj, ok := x.s.Desired.Get(key)
	if !ok {
		return nil, false, false
	}
	w, ok := obj.(*v1alpha1.Workspace)
	if !ok {
		return nil, false, false
	}
	st, _ := x.s.Workspaces.Get(key)
	c := controllers.FindCondition(st.Conditions, v1alpha1.ConditionReady)
	ready := c != nil && c.Status == v1alpha1.ConditionTrue && c.ObservedGeneration == w.Metadata.Generation
	return w, ready, true
}

// launchesView is the launch path as the controllers see it.
type launchesView struct{ l *launch.Launcher }

var _ controllers.Launches = launchesView{}

func (v launchesView) Launch(id string) (controllers.LaunchInfo, bool) {
	i, ok := v.l.Info(id)
	return controllers.LaunchInfo{Workspace: i.Workspace, Attempt: i.Attempt}, ok
}

func (v launchesView) Settle(ctx context.Context, sc cgroup.Scope, emptiedAt time.Time) (bool, error) {
	return v.l.Settle(ctx, sc, emptiedAt)
}

func (v launchesView) Forget(ctx context.Context, id string) error { return v.l.Forget(ctx, id) }

func (v launchesView) Reserved(workspace string) int64 { return v.l.Reserved(workspace) }

// launchMetrics records into the daemon's metrics once they exist.
type launchMetrics struct{ d *Daemon }

func (m launchMetrics) ObserveAdmission(result string) {
	if m.d.metrics != nil {
		m.d.metrics.ObserveAdmission(result)
	}
}

func (m launchMetrics) ObserveLaunch(result string, d time.Duration) {
	if m.d.metrics != nil {
		m.d.metrics.ObserveLaunch(result, d)
	}
}

// serveRun answers POST /v1/run: the caller, the process at the other end
// of the connection, is launched (the answer is its exec plan; it is
// inside its scope already), or refused before anything was started, or
// told what its launch would mean and need.
func (d *Daemon) serveRun(w http.ResponseWriter, r *http.Request) {
	// The whole body is read, so that the server notices at once when
	// the caller goes away: the request's context ends then.
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRunBody))
	if err != nil {
		writeRunError(w, http.StatusBadRequest, localapi.CodeBadRequest, "reading the run request: "+err.Error())
		return
	}
	var req localapi.RunRequest
	if err := json.Unmarshal(data, &req); err != nil {
		writeRunError(w, http.StatusBadRequest, localapi.CodeBadRequest, "decoding the run request: "+err.Error())
		return
	}
	if len(req.Argv) == 0 || req.TimeoutMS < 0 {
		writeRunError(w, http.StatusBadRequest, localapi.CodeInvalid, "a run needs argv and a timeout that is not negative")
		return
	}
	lreq := launch.Request{
		Workspace: req.Workspace, Argv: req.Argv, TTY: req.PTY,
		Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, Env: make([]string, len(req.Env)),
	}
	for i, kv := range req.Env {
		lreq.Env[i] = string(kv)
	}
	if req.Explain {
		d.explainRun(w, lreq)
		return
	}
	conn, ok := apiserver.PeerConn(r.Context())
	if !ok {
		writeRunError(w, http.StatusBadRequest, localapi.CodeBadRequest, "a run is answered only on the unix socket")
		return
	}
	caller, err := launch.PinPeer(conn)
	if err != nil {
		d.log.Warn("run: the caller cannot be pinned", "err", err)
		writeRunError(w, http.StatusBadRequest, localapi.CodeBadRequest, "the caller cannot be pinned: it exited, or is not visible to marshald")
		return
	}
	pe, err := d.launcher.Prepare(r.Context(), lreq, caller)
	if err != nil {
		d.refuseRun(w, err)
		return
	}
	plan, err := pe.Launch(r.Context(), lreq)
	if err != nil {
		d.refuseRun(w, err)
		return
	}
	p := &localapi.ExecPlan{
		Path: plan.Path, Argv: plan.Argv, Dir: plan.Dir, ID: plan.ID, Scope: plan.Scope,
		Attempt: plan.Attempt, Unaccounted: string(plan.Unaccounted), Env: make([][]byte, len(plan.Env)),
	}
	for i, kv := range plan.Env {
		p.Env[i] = []byte(kv)
	}
	writeRun(w, localapi.RunResult{Plan: p})
}

// refuseRun answers a refusal, or an internal error that is not one.
func (d *Daemon) refuseRun(w http.ResponseWriter, err error) {
	var ref *launch.Refusal
	if !errors.As(err, &ref) {
		d.log.Error("run failed", "err", err)
		writeRunError(w, http.StatusInternalServerError, localapi.CodeInternal, "the run failed; see marshald's log")
		return
	}
	if ref.Code == launch.CodeInternal || ref.Code == launch.CodeAdmissionUnknown {
		d.log.Warn("run refused", "code", ref.Code, "attempt", ref.Attempt, "pid", ref.PID, "state", ref.State, "err", err)
	}
	writeRun(w, localapi.RunResult{Refusal: refusalOf(ref)})
}

// refusalOf is a refusal as the API says it: the edge maps the launch
// path's codes and states to the wire's.
func refusalOf(r *launch.Refusal) *localapi.Refusal {
	code := map[launch.Code]string{
		launch.CodeWorkspaceNotReady:    localapi.RefusalWorkspaceNotReady,
		launch.CodeExecNotAllowed:       localapi.RefusalExecNotAllowed,
		launch.CodeWorkspaceBusy:        localapi.RefusalWorkspaceBusy,
		launch.CodeResourceUnavailable:  localapi.RefusalResourceUnavailable,
		launch.CodePolicyUnsupported:    localapi.RefusalPolicyUnsupported,
		launch.CodeAuthorityUnavailable: localapi.RefusalAuthorityUnavailable,
		launch.CodeAdmissionUnknown:     localapi.RefusalAdmissionUnknown,
	}[r.Code]
	if code == "" {
		code = localapi.RefusalInternal
	}
	state := map[launch.State]string{
		launch.StateNotAsked:    localapi.AttemptNotAsked,
		launch.StateNotRecorded: localapi.AttemptNotRecorded,
		launch.StateDenied:      localapi.AttemptDenied,
		launch.StateCancelled:   localapi.AttemptCancelled,
		launch.StateExpired:     localapi.AttemptExpired,
	}[r.State]
	if state == "" {
		state = localapi.AttemptUnknown
	}
	return &localapi.Refusal{Code: code, Detail: r.Detail, Attempt: r.Attempt, Process: r.PID, State: state}
}

// explainRun answers what a run would mean and need.
func (d *Daemon) explainRun(w http.ResponseWriter, req launch.Request) {
	select {
	case <-d.launcher.Ready():
	default:
		writeRunError(w, http.StatusServiceUnavailable, localapi.CodeUnavailable, "marshald is starting")
		return
	}
	e, err := d.launcher.Explain(req)
	if err != nil {
		d.refuseRun(w, err)
		return
	}
	meaning, err := json.Marshal(e.Meaning)
	if err != nil {
		d.refuseRun(w, err)
		return
	}
	a := localapi.ExplainAdmission{
		Participation: string(e.Participation),
		Request:       amounts(e.Intent.Requested),
		Minimum: map[string]string{
			string(cgroup.CPU): string(e.Intent.Minimum.CPU), string(cgroup.Memory): string(e.Intent.Minimum.Memory),
			string(cgroup.PIDs): string(e.Intent.Minimum.PIDs),
		},
		Supported: e.Supported, Unsupported: e.Unsupported, Ready: e.Ready,
		Free: amounts(e.Free), Target: amounts(e.Target), Fits: e.Fits, Shortage: e.Shortage,
		Limits: v1alpha1.Amounts{CPUMilli: e.Limits.CPUMilli, MemoryBytes: e.Limits.MemoryBytes, Tasks: e.Limits.Tasks},
	}
	if e.Plan != nil {
		for _, r := range cgroup.AllResources {
			en := e.Plan.Get(r)
			a.Host = append(a.Host, v1alpha1.Enforcement{Resource: string(r), Level: en.Level, Method: string(en.Method), Controller: en.Controller})
		}
	}
	writeRun(w, localapi.RunResult{Explain: &localapi.Explain{Meaning: meaning, Digest: e.Digest, Admission: a}})
}

func writeRun(w http.ResponseWriter, res localapi.RunResult) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	json.NewEncoder(w).Encode(res)
}

func writeRunError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(&localapi.Error{Code: code, Message: msg})
}

// waitLauncher blocks until the launcher recovered the launches of an
// earlier run, so that the controllers never take a launch's scope for
// an unknown one; it reports false when ctx ended first.
func (d *Daemon) waitLauncher(ctx context.Context) bool {
	select {
	case <-d.launcher.Ready():
		return true
	case <-ctx.Done():
		return false
	}
}
