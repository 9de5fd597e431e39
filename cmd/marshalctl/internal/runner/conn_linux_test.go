package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// serveRun answers run requests with h, on a net/http server on a unix
// socket in t.TempDir(), until t ends.
func serveRun(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	socket := filepath.Join(testutil.ShortDir(t), "s")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+localapi.RunPath, h)
	srv := &http.Server{Handler: mux}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return socket
}

// The plan is read whether net/http sends it with a length or, when it
// outgrows the server's buffer, chunked.
func TestPostRunReadsThePlan(t *testing.T) {
	tests := []struct {
		name string
		env  [][]byte
	}{
		{name: "with_a_length", env: [][]byte{[]byte("HOME=/home/dev")}},
		{name: "chunked", env: [][]byte{[]byte("HOME=/home/dev"), bytes.Repeat([]byte("X"), 200<<10)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := &localapi.ExecPlan{Path: "/bin/true", Argv: []string{"true"}, Env: tc.env, Dir: "/srv/web",
				ID: "0123456789abcdef0123456789abcdef", Scope: "marshal-web-0123.scope"}
			requests := make(chan localapi.RunRequest, 1)
			socket := serveRun(t, func(w http.ResponseWriter, r *http.Request) {
				var req localapi.RunRequest
				json.NewDecoder(r.Body).Decode(&req)
				requests <- req
				json.NewEncoder(w).Encode(localapi.RunResult{Plan: want})
			})
			res, err := postRun(t.Context(), socket, &localapi.RunRequest{Workspace: "web", Argv: []string{"true"}, Env: tc.env})
			if err != nil || !reflect.DeepEqual(res.Plan, want) {
				t.Fatalf("postRun = %+v, %v; want the plan %+v", res, err, want)
			}
			if got := <-requests; got.Workspace != "web" || !reflect.DeepEqual(got.Env, tc.env) {
				t.Errorf("marshald read the request %+v", got)
			}
		})
	}
}

// An interrupt while marshald works ends the run request at once, and
// marshald sees the caller go away.
func TestPostRunInterrupted(t *testing.T) {
	started := make(chan struct{})
	gone := make(chan struct{})
	socket := serveRun(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(started)
		<-r.Context().Done()
		close(gone)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := postRun(ctx, socket, &localapi.RunRequest{Workspace: "web", Argv: []string{"true"}})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("postRun = %v before marshald had the request", err)
	case <-time.After(testutil.Deadline):
		t.Fatalf("the request did not arrive after %v", testutil.Deadline)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("postRun after an interrupt = %v, want context.Canceled", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatalf("postRun still blocked %v after an interrupt", testutil.Deadline)
	}
	select {
	case <-gone:
	case <-time.After(testutil.Deadline):
		t.Fatalf("marshald did not see the caller go away after %v", testutil.Deadline)
	}
}

func TestPostRunFailures(t *testing.T) {
	hijack := func(answer string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			buf.WriteString(answer)
			buf.Flush()
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		message string
	}{
		{name: "refused_request", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"code":"INVALID","message":"a run needs argv"}`))
		}, want: &localapi.Error{Code: localapi.CodeInvalid, Message: "a run needs argv"}},
		{name: "text_error", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream broke", http.StatusBadGateway)
		}, want: &localapi.Error{Code: localapi.CodeInternal, Message: "502 Bad Gateway upstream broke"}},
		{name: "malformed_answer", handler: hijack("garbage\r\n\r\n"),
			want: client.ErrBadResponse, message: "marshald went away during the run request"},
		{name: "no_answer", handler: hijack(""),
			want: io.ErrUnexpectedEOF, message: "marshald went away during the run request"},
		{name: "answer_cut_short", handler: hijack("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"plan\":"),
			want: io.ErrUnexpectedEOF, message: "marshald went away during the run request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket := serveRun(t, tc.handler)
			_, err := postRun(t.Context(), socket, &localapi.RunRequest{Workspace: "web", Argv: []string{"true"}})
			var apiErr *localapi.Error
			switch want := tc.want.(type) {
			case *localapi.Error:
				if !errors.As(err, &apiErr) || *apiErr != *want {
					t.Errorf("postRun = %v, want %v", err, want)
				}
			default:
				if !errors.Is(err, want) || !strings.Contains(err.Error(), tc.message) {
					t.Errorf("postRun = %v, want %v saying %q", err, want, tc.message)
				}
			}
		})
	}
	// A refusal before the request is read whole is what the caller
	// gets, not a broken pipe; a net/http server reads on before it
	// closes, so a listener of its own shows it.
	t.Run("answered_before_the_request_is_read", func(t *testing.T) {
		socket := filepath.Join(testutil.ShortDir(t), "s")
		ln, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		refusal := `{"code":"FORBIDDEN","message":"uid 1000 is not admitted"}`
		served := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				served <- err
				return
			}
			defer c.Close()
			c.Read(make([]byte, 16))
			_, err = fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s", len(refusal), refusal)
			served <- err
		}()
		env := [][]byte{bytes.Repeat([]byte("X"), 8<<20)}
		_, err = postRun(t.Context(), socket, &localapi.RunRequest{Workspace: "web", Argv: []string{"true"}, Env: env})
		var apiErr *localapi.Error
		if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeForbidden {
			t.Errorf("postRun refused before it was read = %v, want FORBIDDEN", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(testutil.Deadline):
			t.Fatalf("the server did not answer after %v", testutil.Deadline)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		socket := filepath.Join(t.TempDir(), "none.sock")
		_, err := postRun(t.Context(), socket, &localapi.RunRequest{Workspace: "web", Argv: []string{"true"}})
		var ue *client.UnreachableError
		if !errors.As(err, &ue) || ue.Socket != socket {
			t.Errorf("postRun on %s = %v, want an UnreachableError", socket, err)
		}
	})
}
