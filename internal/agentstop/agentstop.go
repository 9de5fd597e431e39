package agentstop

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

// Scopes signals a scope's tree; cgroup.Backend implements it. Both
// return nil for a scope that does not exist.
type Scopes interface {
	Terminate(ctx context.Context, s cgroup.Scope) error
	Kill(ctx context.Context, s cgroup.Scope) error
}

var _ Scopes = cgroup.Backend(nil)

// Stopper sends the SIGTERM of each Stop at once and its SIGKILL when the
// grace period ends. Create it with New; Run sends the kills.
type Stopper struct {
	scopes Scopes
	clock  clock.WithTicker
	log    *slog.Logger
	// wake is signalled when a kill is added.
	wake chan struct{}

	// mu guards pending.
	mu sync.Mutex
	// pending are the kills to send, by scope name.
	pending map[string]kill
}

// kill is a SIGKILL to send at a time.
type kill struct {
	scope cgroup.Scope
	at    time.Time
}

// New returns a Stopper that signals through scopes, on clk.
func New(scopes Scopes, clk clock.WithTicker, log *slog.Logger) *Stopper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stopper{scopes: scopes, clock: clk, log: log, wake: make(chan struct{}, 1), pending: map[string]kill{}}
}

// Stop asks the tree of s to end: SIGTERM now and SIGKILL once grace has
// passed, or SIGKILL now when grace is not positive. Asking again for a
// scope whose kill is pending moves the kill earlier, never later. It
// returns the error of the signal it sent now.
func (st *Stopper) Stop(ctx context.Context, s cgroup.Scope, grace time.Duration) error {
	if grace <= 0 {
		st.mu.Lock()
		delete(st.pending, s.Name)
		st.mu.Unlock()
		if err := st.scopes.Kill(ctx, s); err != nil {
			return fmt.Errorf("killing %s: %w", s.Name, err)
		}
		return nil
	}
	if err := st.scopes.Terminate(ctx, s); err != nil {
		return fmt.Errorf("terminating %s: %w", s.Name, err)
	}
	at := st.clock.Now().Add(grace)
	st.mu.Lock()
	if k, ok := st.pending[s.Name]; !ok || at.Before(k.at) {
		st.pending[s.Name] = kill{scope: s, at: at}
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return nil
}

// Pending reports whether a kill of the scope named is pending.
func (st *Stopper) Pending(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.pending[name]
	return ok
}

// Run sends each pending kill when it is due, until ctx ends; it then
// returns nil, and the kills still pending are not sent.
func (st *Stopper) Run(ctx context.Context) error {
	for {
		var (
			timer clock.Timer
			due   <-chan time.Time
		)
		if next, ok := st.next(); ok {
			timer = st.clock.NewTimer(next.Sub(st.clock.Now()))
			due = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-st.wake:
		case <-due:
			st.killDue(ctx)
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// next is the time of the earliest pending kill.
func (st *Stopper) next() (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var next time.Time
	for _, k := range st.pending {
		if next.IsZero() || k.at.Before(next) {
			next = k.at
		}
	}
	return next, !next.IsZero()
}

// killDue sends the kills whose time has come.
func (st *Stopper) killDue(ctx context.Context) {
	now := st.clock.Now()
	var due []cgroup.Scope
	st.mu.Lock()
	for name, k := range st.pending {
		if !now.Before(k.at) {
			due = append(due, k.scope)
			delete(st.pending, name)
		}
	}
	st.mu.Unlock()
	for _, s := range due {
		if err := st.scopes.Kill(ctx, s); err != nil && ctx.Err() == nil {
			st.log.Warn("killing an agent whose grace period ended", "scope", s.Name, "err", err)
		}
	}
}
