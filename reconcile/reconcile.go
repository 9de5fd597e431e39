package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Key names one object: its kind and its name. It is comparable, so it
// serves as a map key and as the work-queue item.
type Key struct {
	// Kind is the object's kind, such as "Profile".
	Kind string
	// Name is the object's name within its kind.
	Name string
}

// String returns "Kind/name".
func (k Key) String() string { return k.Kind + "/" + k.Name }

// ParseKey parses the "Kind/name" form that Key.String returns. It returns
// ErrInvalidKey when s has no '/' or an empty kind or name.
func ParseKey(s string) (Key, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" {
		return Key{}, fmt.Errorf("%q: want Kind/name: %w", s, ErrInvalidKey)
	}
	return Key{Kind: kind, Name: name}, nil
}

// Request asks a Reconciler to make one object's world match its
// declaration. It names the object and says nothing about the event that
// caused it: the reconciler reads desired and observed state afresh.
type Request struct {
	Key Key
}

// String returns the key's "Kind/name" form.
func (r Request) String() string { return r.Key.String() }

// Result says when to reconcile the object again when nothing else
// changes. The zero Result means "done until the next change".
type Result struct {
	// RequeueAfter, when positive, reconciles the object again after this
	// long, measured on the controller's clock. It is ignored when
	// Reconcile also returns an error: the error's backoff applies instead.
	RequeueAfter time.Duration
}

// Reconciler makes the world match the declaration for one object.
//
// Reconcile is level-triggered and must be idempotent: it may be called
// any number of times for the same key, including after the object was
// deleted (it then cleans up what the object owned). A Controller never
// calls it for the same key from two goroutines at once; calls for
// different keys run concurrently.
//
// Returning an error retries the key with per-key exponential backoff;
// wrapping it with TerminalError stops the retries until the key is
// enqueued again. A successful return forgets the key's backoff.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// Func adapts an ordinary function to the Reconciler interface.
type Func func(ctx context.Context, req Request) (Result, error)

var _ Reconciler = Func(nil)

// Reconcile calls f(ctx, req).
func (f Func) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// TerminalError marks err as one that retrying cannot fix, such as a
// declaration the reconciler can never satisfy. A Controller logs it, counts
// it and forgets the key's backoff instead of retrying; the next change to
// the object enqueues it again. errors.Is(e, ErrTerminal) reports whether e
// is, or wraps, a terminal error; errors.Unwrap reaches err.
//
// TerminalError(nil) is still a (terminal) error, so that
// `return Result{}, TerminalError(err)` never reads as success by mistake.
func TerminalError(err error) error {
	return &terminalError{err: err}
}

type terminalError struct {
	err error
}

func (e *terminalError) Error() string {
	if e.err == nil {
		return ErrTerminal.Error()
	}
	return ErrTerminal.Error() + ": " + e.err.Error()
}

func (e *terminalError) Unwrap() error { return e.err }

// Is makes errors.Is(e, ErrTerminal) true.
func (e *terminalError) Is(target error) bool { return target == ErrTerminal }

// IsTerminal reports whether err is, or wraps, an error made by
// TerminalError. It is errors.Is(err, ErrTerminal).
func IsTerminal(err error) bool { return errors.Is(err, ErrTerminal) }
