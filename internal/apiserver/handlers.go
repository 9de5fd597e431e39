package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/control"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

// handlerFunc answers a request or returns the error to answer with. A
// handler that has started a response answers its errors itself and
// returns nil.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() {
	// Each route is judged by the control plane before it acts: reads
	// here, and the routes whose action depends on the request (apply,
	// delete, run) in their handlers, once the body says which.
	s.mux.Handle("/", s.only("", s.noRoute))
	s.mux.Handle(localapi.InfoPath, s.only(http.MethodGet, s.as(control.Read, s.info)))
	s.mux.Handle(localapi.ObjectsPath+"{resource}", s.only(http.MethodGet, s.as(control.Read, s.list)))
	s.mux.Handle(localapi.ObjectsPath+"{resource}/{name}", s.only(http.MethodGet, s.as(control.Read, s.get)))
	s.mux.Handle(localapi.EventsPath, s.only(http.MethodGet, s.as(control.Read, s.events)))
	s.mux.Handle(localapi.ApplyPath, s.only(http.MethodPost, s.apply))
	s.mux.Handle(localapi.DeletePath, s.only(http.MethodPost, s.delete))
	s.mux.Handle(localapi.ConfirmEmptyPath, s.only(http.MethodPost, s.as(control.Admin, s.confirmEmpty)))
	s.mux.Handle(localapi.DoctorPath, s.only(http.MethodGet, s.as(control.Read, s.doctor)))
	s.mux.Handle(localapi.RunPath, s.only(http.MethodPost, s.run))
	s.mux.Handle(localapi.BackupPath, s.only(http.MethodGet, s.as(control.Admin, s.backup)))
	s.mux.Handle(localapi.EgressLogPath, s.only(http.MethodGet, s.as(control.Read, s.egressLog)))
	s.mux.Handle(localapi.RenderPath, s.only(http.MethodPost, s.as(control.Read, s.render)))
	if s.opts.Metrics != nil {
		s.mux.Handle(localapi.MetricsPath, s.only(http.MethodGet, s.as(control.Read, s.metrics)))
	}
	s.mux.Handle(localapi.StopPath, s.only(http.MethodPost, s.as(control.Stop, s.stop)))
}

// only answers requests of method (any, when empty) with h and others
// with 405.
func (s *Server) only(method string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if method != "" && r.Method != method {
			w.Header().Set("Allow", method)
			s.fail(w, r, apiError(http.StatusMethodNotAllowed, localapi.CodeBadRequest,
				"%s %s: method not allowed; use %s", r.Method, r.URL.Path, method))
			return
		}
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) error {
	if strings.HasPrefix(r.URL.Path, localapi.ObjectsPath) {
		return apiError(http.StatusNotFound, localapi.CodeNotFound,
			"no route %s; objects are at %s<resource>[/<name>], resources: %s",
			r.URL.Path, localapi.ObjectsPath, knownResources())
	}
	return apiError(http.StatusNotFound, localapi.CodeNotFound, "no route %s", r.URL.Path)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.d.Info(r.Context()))
	return nil
}

func (s *Server) doctor(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.d.Doctor(r.Context()))
	return nil
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) error {
	var req localapi.StopRequest
	if err := s.decode(w, r, &req, s.maxBody); err != nil {
		return err
	}
	if req.Agent == "" || req.GraceMS < 0 {
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "a stop needs an agent and a grace period that is not negative")
	}
	err := s.d.StopAgent(r.Context(), req.Agent, time.Duration(req.GraceMS)*time.Millisecond)
	if errors.Is(err, ErrNotFound) {
		return apiError(http.StatusNotFound, localapi.CodeNotFound, "agent %q not found", req.Agent)
	}
	if err != nil {
		return err
	}
	res := localapi.StopResult{Signal: "SIGTERM"}
	if req.GraceMS == 0 {
		res.Signal = "SIGKILL"
	}
	writeJSON(w, http.StatusOK, &res)
	return nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) error {
	res, err := resource(r.PathValue("resource"))
	if err != nil {
		return err
	}
	watch, err := boolParam(r, localapi.WatchParam)
	if err != nil {
		return err
	}
	sel, err := requestSelector(r)
	if err != nil {
		return err
	}
	if watch {
		return s.watchObjects(w, r, res, sel)
	}
	items, err := s.listSelected(r.Context(), res.Kind, sel)
	if err != nil {
		return err
	}
	list := localapi.ObjectList{Kind: res.Kind + "List", Items: make([]json.RawMessage, 0, len(items))}
	for _, item := range items {
		data, err := json.Marshal(item)
		if err != nil {
			return fmt.Errorf("encoding a %s: %w", res.Kind, err)
		}
		list.Items = append(list.Items, data)
	}
	writeJSON(w, http.StatusOK, &list)
	return nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) error {
	res, err := resource(r.PathValue("resource"))
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	obj, err := s.d.Get(r.Context(), res.Kind, name)
	if errors.Is(err, ErrNotFound) {
		return apiError(http.StatusNotFound, localapi.CodeNotFound, "%s %q not found", res.Plural, name)
	}
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding %s %q: %w", res.Kind, name, err)
	}
	writeJSON(w, http.StatusOK, json.RawMessage(data))
	return nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var key reconcile.Key
	if kind := q.Get(localapi.KindParam); kind != "" {
		// Events may be about things that are not served resources, such
		// as the config dir; those are named by their kind as recorded.
		key.Kind = kind
		if res, ok := localapi.ResourceFor(kind); ok {
			key.Kind = res.Kind
		}
	}
	key.Name = q.Get(localapi.NameParam)
	if key.Name != "" && key.Kind == "" {
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "%s needs %s too", localapi.NameParam, localapi.KindParam)
	}
	if key.Kind != "" && key.Name == "" {
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "%s needs %s too", localapi.KindParam, localapi.NameParam)
	}
	var after uint64
	if v := q.Get(localapi.AfterParam); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "%s=%q: want a sequence number", localapi.AfterParam, v)
		}
		after = n
	}
	watch, err := boolParam(r, localapi.WatchParam)
	if err != nil {
		return err
	}
	if watch {
		return s.watchEvents(w, r, key, after)
	}
	evs, _ := s.d.Events(key, after)
	list := localapi.EventList{Items: evs}
	if list.Items == nil {
		list.Items = []v1alpha1.Event{}
	}
	writeJSON(w, http.StatusOK, &list)
	return nil
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) error {
	var req localapi.ApplyRequest
	if err := s.decode(w, r, &req, s.maxBody); err != nil {
		return err
	}
	switch {
	case req.AllowEmpty && !req.DryRun:
		// It releases a held, emptied config dir, as confirm-empty does.
		if err := s.authorize(r, control.Admin, ""); err != nil {
			return err
		}
		fallthrough
	case !req.DryRun:
		if err := s.authorize(r, control.Apply, ""); err != nil {
			return err
		}
	default:
		if err := s.authorize(r, control.Read, ""); err != nil {
			return err
		}
	}
	res, err := s.d.Apply(r.Context(), req)
	if err != nil {
		return err
	}
	if res.Outcomes == nil {
		res.Outcomes = []localapi.Outcome{}
	}
	writeJSON(w, http.StatusOK, &res)
	return nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) error {
	var req localapi.DeleteRequest
	if err := s.decode(w, r, &req, s.maxBody); err != nil {
		return err
	}
	action := control.Delete
	if req.DryRun {
		action = control.Read
	}
	if err := s.authorize(r, action, ""); err != nil {
		return err
	}
	res, err := s.d.Delete(r.Context(), req)
	if err != nil {
		return err
	}
	if res.Outcomes == nil {
		res.Outcomes = []localapi.Outcome{}
	}
	writeJSON(w, http.StatusOK, &res)
	return nil
}

func (s *Server) confirmEmpty(w http.ResponseWriter, r *http.Request) error {
	released, err := s.d.ConfirmEmpty(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &localapi.ConfirmEmptyResult{Released: released})
	return nil
}

// decode reads the request body, to its end, as one JSON value into v,
// strictly and at most limit bytes of it: a body declared longer is
// refused before any of it is read, and one that has not arrived whole
// within Options.BodyTimeout is refused then.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		return apiError(http.StatusRequestEntityTooLarge, localapi.CodeBadRequest,
			"request body of %d bytes is over the limit of %d bytes; send fewer files at once", r.ContentLength, limit)
	}
	err := s.decodeBody(w, r, v, limit)
	if err == nil {
		unboundBody(w)
	} else {
		w.Header().Set("Connection", "close")
	}
	return err
}

func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return apiError(http.StatusRequestEntityTooLarge, localapi.CodeBadRequest,
			"request body is over the limit of %d bytes; send fewer files at once", tooLarge.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return apiError(http.StatusRequestTimeout, localapi.CodeBadRequest,
			"request body did not arrive whole within %v", s.opts.BodyTimeout)
	case errors.Is(err, io.EOF):
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "request body is empty; want JSON")
	default:
		return apiError(http.StatusBadRequest, localapi.CodeBadRequest, "request body: %v", err)
	}
}

// fail answers err with its status and code. An internal error is
// logged with its cause, which the answer does not carry.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	msg := err.Error()
	var he *httpError
	if errors.As(err, &he) {
		msg = he.msg
		if he.cause != nil {
			err = he.cause
		}
	}
	if status == http.StatusInternalServerError {
		s.log.Error("local API: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, &localapi.Error{Code: code, Message: msg})
}

// classify maps an error to the HTTP status and localapi code it is
// answered with. This is the only place errors become wire codes.
func classify(err error) (int, string) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status, he.code
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, localapi.CodeNotFound
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, localapi.CodeInvalid
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, localapi.CodeConflict
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, localapi.CodeUnavailable
	case errors.Is(err, ErrNotSupported), errors.Is(err, errors.ErrUnsupported):
		return http.StatusNotImplemented, localapi.CodeNotSupported
	}
	return http.StatusInternalServerError, localapi.CodeInternal
}

// httpError is an error the server itself answers a request with.
type httpError struct {
	status int
	code   string
	msg    string
	// cause, when set, is logged and never answered.
	cause error
}

func (e *httpError) Error() string { return e.code + ": " + e.msg }

func apiError(status int, code, format string, args ...any) error {
	return &httpError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// internalError answers 500 INTERNAL with msg, a fixed phrase, and leaves
// cause to the log: it may hold text of the system's or the authority's.
func internalError(msg string, cause error) error {
	return &httpError{status: http.StatusInternalServerError, code: localapi.CodeInternal, msg: msg, cause: cause}
}

// resource resolves a resource named in a path.
func resource(name string) (localapi.Resource, error) {
	res, ok := localapi.ResourceFor(name)
	if !ok {
		return localapi.Resource{}, apiError(http.StatusNotFound, localapi.CodeNotFound,
			"unknown resource %q; known: %s", name, knownResources())
	}
	return res, nil
}

func knownResources() string {
	names := make([]string, len(localapi.Resources))
	for i, r := range localapi.Resources {
		names[i] = r.Plural
	}
	return strings.Join(names, ", ")
}

// boolParam reads a query parameter that is a flag: absent is false.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "%s=%q: want 1 or 0", name, v)
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// An error here means the client went away; there is no one left to
	// tell.
	_ = json.NewEncoder(w).Encode(v)
}
