package apiserver

import (
	"encoding/json"
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
	q := r.URL.Query()
	follow, err := boolParam(r, localapi.FollowParam)
	if err != nil {
		return err
	}
	tail := -1
	if v := q.Get(localapi.TailParam); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "%s=%q: want a number of records, 0 or more", localapi.TailParam, v)
		}
		tail = n
	}
	profile, workspace := q.Get(localapi.ProfileParam), q.Get(localapi.WorkspaceParam)
	keep := func(line []byte) bool {
		if profile == "" && workspace == "" {
			return true
		}
		var rec struct {
			Profile   string `json:"profile"`
			Workspace string `json:"workspace"`
		}
		if json.Unmarshal(line, &rec) != nil {
			return false
		}
		return (profile == "" || rec.Profile == profile) && (workspace == "" || rec.Workspace == workspace)
	}

	var (
		rc      = http.NewResponseController(w)
		started bool
		live    bool
		// last holds the newest tail records kept, until the history is
		// read.
		last [][]byte
	)
	start := func() {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	write := func(line []byte) error {
		start()
		if _, err := w.Write(line); err != nil {
			return errClientGone
		}
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return errClientGone
		}
		return nil
	}
	onRecord := func(line []byte) error {
		if !keep(line) {
			return nil
		}
		if live {
			if err := write(line); err != nil {
				return err
			}
			if rc.Flush() != nil {
				return errClientGone
			}
			return nil
		}
		if tail < 0 {
			return write(line)
		}
		if tail == 0 {
			return nil
		}
		if len(last) == tail {
			last = append(last[:0], last[1:]...)
		}
		last = append(last, append([]byte(nil), line...))
		return nil
	}
	caughtUp := func() error {
		for _, line := range last {
			if err := write(line); err != nil {
				return err
			}
		}
		last, live = nil, true
		start()
		if rc.Flush() != nil {
			return errClientGone
		}
		return nil
	}
	err = s.d.EgressLog(r.Context(), follow, onRecord, caughtUp)
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
