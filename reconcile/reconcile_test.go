package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/marshal-dev/marshal/reconcile"
)

func TestKeyStringAndParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    reconcile.Key
		wantErr bool
	}{
		{name: "kind_and_name", in: "Profile/coder", want: reconcile.Key{Kind: "Profile", Name: "coder"}},
		{name: "name_with_slash_keeps_rest", in: "Agent/a/b", want: reconcile.Key{Kind: "Agent", Name: "a/b"}},
		{name: "no_slash", in: "Profile", wantErr: true},
		{name: "empty_kind", in: "/coder", wantErr: true},
		{name: "empty_name", in: "Profile/", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reconcile.ParseKey(tc.in)
			if tc.wantErr {
				if !errors.Is(err, reconcile.ErrInvalidKey) {
					t.Errorf("ParseKey(%q) = %v, %v; want ErrInvalidKey", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseKey(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if s := got.String(); s != tc.in {
				t.Errorf("%v.String() = %q, want %q", got, s, tc.in)
			}
		})
	}
}

func TestTerminalError(t *testing.T) {
	cause := errors.New("root is a file")
	tests := []struct {
		name     string
		err      error
		terminal bool
		msg      string
	}{
		{name: "plain", err: cause, terminal: false, msg: "root is a file"},
		{name: "terminal", err: reconcile.TerminalError(cause), terminal: true, msg: "terminal error: root is a file"},
		{name: "wrapped_terminal", err: fmt.Errorf("workspace %q: %w", "w", reconcile.TerminalError(cause)),
			terminal: true, msg: `workspace "w": terminal error: root is a file`},
		{name: "terminal_of_nil", err: reconcile.TerminalError(nil), terminal: true, msg: "terminal error"},
		{name: "joined", err: errors.Join(cause, reconcile.TerminalError(nil)), terminal: true, msg: "root is a file\nterminal error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := reconcile.IsTerminal(tc.err); got != tc.terminal {
				t.Errorf("IsTerminal(%v) = %v, want %v", tc.err, got, tc.terminal)
			}
			if got := errors.Is(tc.err, reconcile.ErrTerminal); got != tc.terminal {
				t.Errorf("errors.Is(%v, ErrTerminal) = %v, want %v", tc.err, got, tc.terminal)
			}
			if got := tc.err.Error(); got != tc.msg {
				t.Errorf("Error() = %q, want %q", got, tc.msg)
			}
		})
	}
	if err := reconcile.TerminalError(cause); !errors.Is(err, cause) {
		t.Errorf("errors.Is(TerminalError(cause), cause) = false, want true")
	}
}

func TestFuncAdapter(t *testing.T) {
	var got reconcile.Request
	var r reconcile.Reconciler = reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		got = req
		return reconcile.Result{RequeueAfter: 7}, nil
	})
	req := reconcile.Request{Key: pkey("p")}
	res, err := r.Reconcile(t.Context(), req)
	if err != nil || res.RequeueAfter != 7 || got != req {
		t.Errorf("Func.Reconcile = %v, %v (saw %v); want {7}, nil (saw %v)", res, err, got, req)
	}
}

func TestPanicErrorUnwraps(t *testing.T) {
	cause := errors.New("index out of range")
	var err error = &reconcile.PanicError{Value: cause}
	if !errors.Is(err, cause) {
		t.Error("errors.Is(PanicError{cause}, cause) = false, want true")
	}
	if err := (&reconcile.PanicError{Value: "text"}); errors.Unwrap(err) != nil || err.Error() != "reconcile panicked: text" {
		t.Errorf("PanicError{\"text\"}: Unwrap = %v, Error = %q", errors.Unwrap(err), err.Error())
	}
}
