package apiserver

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// egressLog streams the egress audit log, one record per line: those
// kept (the last TailParam of them, when given), then, with FollowParam,
// every record written later. ProfileParam and WorkspaceParam keep only
// one profile's or one workspace's.
func (s *Server) egressLog(w http.ResponseWriter, r *http.Request) error {
	q := EgressQuery{Tail: -1}
	var err error
	if q.Follow, err = boolParam(r, localapi.FollowParam); err != nil {
		return err
	}
	if v := r.URL.Query().Get(localapi.TailParam); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "%s=%q: want a number of records, 0 or more", localapi.TailParam, v)
		}
		q.Tail = n
	}
	q.Profile, q.Workspace = r.URL.Query().Get(localapi.ProfileParam), r.URL.Query().Get(localapi.WorkspaceParam)
	// An agent reads the lines of its own workspace only; a caller that
	// is no launch's has none.
	if caller := callerOf(r.Context()); !caller.IsUser() {
		if caller.Workspace == "" {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			return nil
		}
		q.Workspace = caller.Workspace
	}

	var (
		rc      = http.NewResponseController(w)
		started bool
		// live is set once the records kept are written: each later one
		// is flushed as it comes.
		live bool
	)
	start := func() {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	onRecord := func(line []byte) error {
		start()
		if _, err := w.Write(line); err != nil {
			return errClientGone
		}
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return errClientGone
		}
		if live && rc.Flush() != nil {
			return errClientGone
		}
		return nil
	}
	caughtUp := func() error {
		live = true
		start()
		if rc.Flush() != nil {
			return errClientGone
		}
		return nil
	}
	err = s.d.EgressLog(r.Context(), q, onRecord, caughtUp)
	switch {
	case err == nil, errors.Is(err, errClientGone):
		return nil
	case !started:
		return err
	}
	// The stream has begun: there is no status left to answer with.
	s.log.Error("local API: reading the egress log", "err", err)
	return nil
}
