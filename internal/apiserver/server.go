package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/httpserve"
	"github.com/marshal-dev/marshal/internal/launch"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

// Defaults of Options.
const (
	// DefaultMaxBodyBytes bounds a request body: an apply of many
	// manifests, each at most 1 MiB, base64-encoded.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultShutdownTimeout bounds how long Serve waits for requests in
	// flight once its context ends.
	DefaultShutdownTimeout = 5 * time.Second
)

// Daemon is what the server asks for its answers. marshald implements it.
// Every method may be called from many goroutines at once. Errors wrap the
// sentinels of this package (ErrNotFound, ErrInvalid, …) where a caller
// should see a specific code; anything else is INTERNAL.
type Daemon interface {
	// Info describes the daemon and what its manifest source sees.
	Info(ctx context.Context) localapi.Info
	// List returns every object of kind (typed v1alpha1 values with
	// status, e.g. *v1alpha1.Profile), sorted by name.
	List(ctx context.Context, kind string) ([]any, error)
	// Get returns one object; an error wrapping ErrNotFound when absent.
	Get(ctx context.Context, kind, name string) (any, error)
	// Changed returns the names of the objects of kind that changed after
	// change number after (see ChangeLog), the number of the latest
	// change, and a channel closed at the next. known is false when the
	// names are not known, for that kind or that far back: a watch then
	// lists the kind again.
	Changed(kind string, after uint64) (names []string, last uint64, next <-chan struct{}, known bool)
	// Events returns the events after seq (about obj, unless zero) and
	// a channel closed when another event is recorded.
	Events(obj reconcile.Key, after uint64) ([]v1alpha1.Event, <-chan struct{})
	// Apply declares the objects of req by writing them into the config
	// dir (see package applier).
	Apply(ctx context.Context, req localapi.ApplyRequest) (localapi.ApplyResult, error)
	// Delete stops declaring the objects of req.
	Delete(ctx context.Context, req localapi.DeleteRequest) (localapi.DeleteResult, error)
	// ConfirmEmpty releases a held, emptied config dir and reports
	// whether one was held.
	ConfirmEmpty(ctx context.Context) (bool, error)
	// Doctor reports what this host can enforce and what is missing.
	Doctor(ctx context.Context) localapi.Doctor
	// Run launches caller, the process at the other end of the request's
	// connection, as req asks: it returns the plan the caller execs, or
	// a *launch.Refusal when the launch was refused before anything was
	// started. Run takes caller, as launch.Launcher.Prepare does. ctx
	// ends when the caller goes away.
	Run(ctx context.Context, req launch.Request, caller *launch.Process) (launch.Plan, error)
	// Explain says what a run of req would mean and need, admitting and
	// running nothing: a *launch.Refusal for a request a run would refuse
	// before admission, an error wrapping launch.ErrNotRunning while the
	// launch path is not running yet.
	Explain(ctx context.Context, req launch.Request) (launch.Explanation, error)
	// StopAgent asks the tree of the agent named to end: SIGTERM now and
	// SIGKILL once grace has passed, or SIGKILL now for a grace of 0 (see
	// package agentstop). An error wrapping ErrNotFound when there is no
	// such agent.
	StopAgent(ctx context.Context, name string, grace time.Duration) error
	// Backup returns a consistent copy of the admission journal as a file
	// open for reading at its start, which no path names any more; the
	// server closes it.
	Backup(ctx context.Context) (*os.File, error)
	// EgressLog reads the egress proxy's audit log: fn gets the records
	// kept that q selects, one localapi.EgressRecord encoded as JSON per
	// call, oldest first; then caughtUp is called; then, with q.Follow,
	// fn gets every record written later that q selects, until ctx ends
	// (EgressQuery.Select does the selecting). fn must not keep its
	// argument. An error from a callback ends the read and is returned.
	// An error wrapping ErrNotSupported when the proxy does not run.
	EgressLog(ctx context.Context, q EgressQuery, fn func(record []byte) error, caughtUp func() error) error
}

// Options configure a Server.
type Options struct {
	// AllowGID, when set, also admits peers whose primary or
	// supplementary groups, as the kernel recorded them at connect,
	// include this group. The daemon's own effective uid and root are
	// always admitted. The socket must let the group connect too: see
	// ListenGroup.
	AllowGID *uint32
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	// A body declared longer is refused before any of it is read.
	MaxBodyBytes int64
	// HeaderTimeout bounds the reading of a request's line and headers;
	// 0 means DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a whole request body, counted
	// from the end of its headers, however slowly it trickles in; 0
	// means DefaultBodyTimeout. A request without a body, such as a
	// watch, is not bounded by it.
	BodyTimeout time.Duration
	// MaxConnsPerPeer bounds the connections one uid, as SO_PEERCRED
	// names it, holds at once; 0 means DefaultMaxConnsPerPeer. Each
	// request of a connection over the bound is answered 429
	// UNAVAILABLE, and the connection closed.
	MaxConnsPerPeer int
	// ShutdownTimeout bounds the graceful shutdown; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Metrics, when set, answers GET /metrics (the Prometheus text
	// format), behind the peer check like every other route.
	Metrics http.Handler
	// Control, when set, attributes every admitted peer to the user or an
	// agent and refuses an agent what its profile does not grant (see
	// package control). Unset: every admitted peer is the user.
	Control Control
	// Logger receives refused peers and internal errors; nil discards
	// them.
	Logger *slog.Logger
}

// Server answers the local API. Create it with New, run it with Serve.
type Server struct {
	d       Daemon
	opts    Options
	uid     uint32
	log     *slog.Logger
	mux     *http.ServeMux
	maxBody int64
	conns   *peerConns
}

var _ http.Handler = (*Server)(nil)

// New returns a server that answers from d.
func New(d Daemon, opts Options) *Server {
	s := &Server{
		d:       d,
		opts:    opts,
		uid:     uint32(os.Geteuid()),
		log:     opts.Logger,
		mux:     http.NewServeMux(),
		maxBody: opts.MaxBodyBytes,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.opts.ShutdownTimeout <= 0 {
		s.opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.opts.HeaderTimeout <= 0 {
		s.opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if s.opts.BodyTimeout <= 0 {
		s.opts.BodyTimeout = DefaultBodyTimeout
	}
	if s.opts.MaxConnsPerPeer <= 0 {
		s.opts.MaxConnsPerPeer = DefaultMaxConnsPerPeer
	}
	s.conns = newPeerConns(s.opts.MaxConnsPerPeer)
	s.routes()
	return s
}

// ServeHTTP answers one request: refused with 403 FORBIDDEN unless the
// connection's peer is admitted, with 429 UNAVAILABLE when the peer holds
// too many connections, else routed, its body bounded in time.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Also for a request answered without reading its body: the server
	// reads up to 256 KiB of what is left before it closes or reuses the
	// connection, and a body trickled in must not hold it then.
	s.boundBody(w, r)
	p, _ := r.Context().Value(peerKey{}).(*peer)
	if p != nil && p.allowed && p.overLimit {
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusTooManyRequests, s.overLimit(p.uid))
		return
	}
	if p == nil || !p.allowed {
		// Nothing of the request is read, and the connection is not
		// kept for another one.
		w.Header().Set("Connection", "close")
		msg := "the caller's credentials could not be read"
		if p != nil {
			msg = p.refusal
		}
		writeJSON(w, http.StatusForbidden, &localapi.Error{Code: localapi.CodeForbidden, Message: msg})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Serve answers connections on ln until ctx ends, then stops accepting,
// lets the requests in flight finish (watches end with ctx) and returns
// nil. It closes ln. It returns an error only when ln fails first.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       s.connContext,
		ConnState:         s.connCounted,
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	err := httpserve.Serve(ctx, srv, ln, s.opts.ShutdownTimeout, func(err error) {
		s.log.Warn("local API: requests still running at shutdown; closing them", "err", err)
	})
	if err != nil {
		return fmt.Errorf("serving the local API: %w", err)
	}
	return nil
}
