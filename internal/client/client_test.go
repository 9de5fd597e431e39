package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/localapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	tests := []struct {
		name   string
		socket string
		want   string
	}{
		{name: "no_socket", socket: filepath.Join(dir, "missing.sock"), want: "no such file or directory"},
		{name: "stale_socket", socket: stale, want: "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.socket).Info(t.Context())
			var ue *UnreachableError
			if !errors.Is(err, ErrUnreachable) || !errors.As(err, &ue) || ue.Socket != tc.socket {
				t.Fatalf("Info on %s = %v, want an UnreachableError", tc.socket, err)
			}
			want := fmt.Sprintf("marshald is not running at %s (%s); start it with `marshald`", tc.socket, tc.want)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error = %q, want it to start with %q", err, want)
			}
		})
	}
}

// flakyList answers List once, then fails.
type flakyList struct {
	*apiservertest.Daemon
	calls chan struct{}
}

func (f *flakyList) List(ctx context.Context, kind string) ([]any, error) {
	select {
	case f.calls <- struct{}{}:
		return f.Daemon.List(ctx, kind)
	default:
		return nil, fmt.Errorf("the store is gone: %w", apiserver.ErrUnavailable)
	}
}

func TestWatchEndsWithTheDaemonsError(t *testing.T) {
	d := &flakyList{Daemon: apiservertest.NewDaemon(), calls: make(chan struct{}, 1)}
	d.Unnamed(v1alpha1.KindProfile) // a change is a List again
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = "coder"
	d.Set(p)
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	var got []string
	err := New(socket).Watch(t.Context(), "prof", func(ev localapi.WatchEvent) error {
		got = append(got, ev.Type)
		d.Remove(v1alpha1.KindProfile, "coder") // the next List fails
		return nil
	})
	var apiErr *localapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeUnavailable || len(got) != 1 || got[0] != localapi.Added {
		t.Errorf("Watch = %v after %v, want UNAVAILABLE after one ADDED", err, got)
	}
}

// failingGet fails every Get.
type failingGet struct{ *apiservertest.Daemon }

func (failingGet) Get(ctx context.Context, kind, name string) (any, error) {
	return nil, fmt.Errorf("the store is gone: %w", apiserver.ErrUnavailable)
}

func TestWatchEndsWithTheDaemonsErrorOnAChange(t *testing.T) {
	d := failingGet{apiservertest.NewDaemon()}
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = "coder"
	d.Set(p)
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	var got []string
	err := New(socket).Watch(t.Context(), "prof", func(ev localapi.WatchEvent) error {
		got = append(got, ev.Type)
		d.Remove(v1alpha1.KindProfile, "coder") // its Get fails
		return nil
	})
	var apiErr *localapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeUnavailable || len(got) != 1 || got[0] != localapi.Added {
		t.Errorf("Watch = %v after %v, want UNAVAILABLE after one ADDED", err, got)
	}
}

func TestWatchStopsWhenFnFails(t *testing.T) {
	d := apiservertest.NewDaemon()
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = "coder"
	d.Set(p)
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	stop := errors.New("enough")
	if err := New(socket).Watch(t.Context(), "profiles", func(localapi.WatchEvent) error { return stop }); err != stop {
		t.Errorf("Watch = %v, want fn's error", err)
	}
}

func TestErrorsWithoutAJSONBody(t *testing.T) {
	dir, err := os.MkdirTemp("", "mcl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case localapi.InfoPath:
			http.Error(w, "upstream broke", http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	defer func() { srv.Close(); <-done }()

	c := New(socket)
	tests := []struct {
		name string
		call func() error
		want localapi.Error
	}{
		{name: "text_body", call: func() error { _, err := c.Info(t.Context()); return err },
			want: localapi.Error{Code: localapi.CodeInternal, Message: "upstream broke"}},
		{name: "empty_body", call: func() error { _, err := c.Doctor(t.Context()); return err },
			want: localapi.Error{Code: localapi.CodeNotFound, Message: "404 Not Found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got *localapi.Error
			if err := tc.call(); !errors.As(err, &got) || *got != tc.want {
				t.Errorf("error = %v, want %+v", err, tc.want)
			}
		})
	}
}

func TestMethodsRoundTrip(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.SetInfo(localapi.Info{Version: "v", Mode: "user"})
	d.SetDoctor(localapi.Doctor{Backend: "cgroupfs"})
	d.UseConfigDir(t.TempDir())
	d.Hold()
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	c := New(socket)
	ctx := t.Context()
	if info, err := c.Info(ctx); err != nil || info.Version != "v" || !info.Source.Held {
		t.Errorf("Info = %+v, %v", info, err)
	}
	if doc, err := c.Doctor(ctx); err != nil || doc.Backend != "cgroupfs" {
		t.Errorf("Doctor = %+v, %v", doc, err)
	}
	manifest := []byte("apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: coder}\nspec: {}\n")
	res, err := c.Apply(ctx, localapi.ApplyRequest{Files: []localapi.ApplyFile{{Name: "p.yaml", Data: manifest}}, DryRun: true})
	if err != nil || len(res.Outcomes) != 1 || res.Outcomes[0].Action != localapi.ActionCreated || !res.DryRun {
		t.Errorf("Apply(dry run) = %+v, %v", res, err)
	}
	if items, err := c.List(ctx, "profiles"); err != nil || len(items) != 0 {
		t.Errorf("List after a dry run = %s, %v, want none", items, err)
	}
	if _, err := c.Apply(ctx, localapi.ApplyRequest{Files: []localapi.ApplyFile{{Name: "p.yaml", Data: manifest}}}); err != nil {
		t.Fatal(err)
	}
	if obj, err := c.Get(ctx, "pr", "coder"); err != nil || !strings.Contains(string(obj), `"name":"coder"`) {
		t.Errorf("Get = %s, %v", obj, err)
	}
	var apiErr *localapi.Error
	if _, err := c.Get(ctx, "profiles", "nope"); !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeNotFound {
		t.Errorf("Get(missing) = %v, want NOT_FOUND", err)
	}
	if del, err := c.Delete(ctx, localapi.DeleteRequest{Kind: "Profile", Name: "coder"}); err != nil ||
		len(del.Outcomes) != 1 || del.Outcomes[0].Action != localapi.ActionDeleted {
		t.Errorf("Delete = %+v, %v", del, err)
	}
	if r, err := c.ConfirmEmpty(ctx); err != nil || !r.Released {
		t.Errorf("ConfirmEmpty = %+v, %v, want released", r, err)
	}
	if r, err := c.ConfirmEmpty(ctx); err != nil || r.Released {
		t.Errorf("second ConfirmEmpty = %+v, %v, want nothing held", r, err)
	}
	if c.Socket() != socket {
		t.Errorf("Socket() = %q, want %q", c.Socket(), socket)
	}
}
