package devguardwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/internal/admission"
	"github.com/marshal-dev/marshal/internal/control"
	"github.com/marshal-dev/marshal/internal/peer"
)

// Options configure a Server. Daemon is required.
type Options struct {
	Daemon Daemon
	// UID is the only uid served, the authority's own on DevGuard's wire:
	// os.Geteuid() by default.
	UID uint32
	// Logger receives why sessions ended early; discarded by default.
	Logger *slog.Logger
	// FrameDeadline, when positive, bounds each frame read or written in
	// place of DevGuard's FrameDeadline. hello states FrameDeadline
	// whatever it is, for a DevGuard client accepts no other: only tests
	// set it, to hold sessions open whatever a busy machine's timing.
	FrameDeadline time.Duration
	// Control, when set, attributes every session's peer to the user or
	// an agent (see package control): a consumer's or the
	// administrator's secret presented from inside an agent is refused
	// unless its profile grants it. Unset: every peer is the user.
	Control Control
}

// Control attributes a session's peer and is told of every judgement of
// an agent's credential. marshald implements it.
type Control interface {
	// Caller says who the process at the other end of c is.
	Caller(c *net.UnixConn) control.Caller
	// Judged is told that a request of action by c was allowed (refusal
	// nil) or refused. It must not block.
	Judged(c control.Caller, action control.Action, refusal *control.Refusal)
}

// Server serves DevGuard's wire: sessions of frames on a unix socket,
// each request answered from the Daemon.
type Server struct {
	d        Daemon
	uid      uint32
	pid      int
	log      *slog.Logger
	deadline time.Duration
	control  Control

	// slots holds a token per session served.
	slots chan struct{}

	// mu guards conns.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// New returns a Server; Serve runs it.
func New(opts Options) (*Server, error) {
	if opts.Daemon == nil {
		return nil, errors.New("devguardwire: a Daemon is required")
	}
	s := &Server{
		d:        opts.Daemon,
		uid:      opts.UID,
		pid:      os.Getpid(),
		log:      opts.Logger,
		deadline: opts.FrameDeadline,
		control:  opts.Control,
		slots:    make(chan struct{}, MaxSessions),
		conns:    map[net.Conn]struct{}{},
	}
	if opts.UID == 0 {
		s.uid = uint32(os.Geteuid())
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.deadline <= 0 {
		s.deadline = FrameDeadline
	}
	return s, nil
}

// Serve accepts sessions on ln until ctx ends, then closes ln and every
// session and returns nil once they all ended. At most MaxSessions are
// served at once; a connection beyond them is closed at once, unread.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			c.Close()
		}
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("devguard socket: %w", err)
		}
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		if !s.track(ctx, c) {
			c.Close()
			<-s.slots
			continue
		}
		wg.Go(func() {
			defer func() { <-s.slots }()
			defer s.untrack(c)
			s.serve(ctx, c)
		})
	}
}

// track adds c to the live sessions, unless ctx has ended: Serve's stop
// then closes it.
func (s *Server) track(ctx context.Context, c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// serve runs one session: the peer is read once with SO_PEERCRED and
// must be of the uid served; then request, answer, … until a frame
// cannot be read, decoded or written, or the version or request id is not
// protocol 1's.
func (s *Server) serve(ctx context.Context, c net.Conn) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	cred, err := peer.Credentials(uc)
	if err != nil || cred.UID != s.uid || cred.PID <= 0 {
		s.log.Debug("a session of another uid, or of an unseen peer, was closed", "uid", cred.UID, "pid", cred.PID)
		return
	}
	caller := admission.Peer{UID: cred.UID, PID: cred.PID}
	st := session{caller: control.Caller{Kind: control.User}}
	if s.control != nil {
		st.caller = s.control.Caller(uc)
	}
	var in []byte
	var out bytes.Buffer
	for ctx.Err() == nil {
		frame, err := ReadFrame(c, in, s.deadline)
		if err != nil {
			return
		}
		in = frame
		req, err := DecodeRequest(frame)
		if err != nil {
			s.log.Debug("a session sent a malformed request and was closed", "pid", cred.PID, "err", err)
			return
		}
		var a answer
		last := req.Version != WireVersion || req.ID == 0
		if last {
			a = fail(errVersion)
		} else {
			a = s.handle(ctx, &st, &req, caller, uc)
		}
		payload, err := encodeAnswer(&out, req.ID, a)
		if err != nil {
			s.log.Warn("encoding an answer", "method", req.Method, "err", err)
			return
		}
		if err := WriteFrame(c, payload, s.deadline); err != nil || last {
			return
		}
	}
}
