package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

func egressRecord(host, profile, workspace string) localapi.EgressRecord {
	return localapi.EgressRecord{
		Time: created, Host: host, Port: 443, Profile: profile, Workspace: workspace,
		Transport: "tcp", Protocol: "connect", Verdict: "deny", Reason: "default",
	}
}

func hosts(recs []localapi.EgressRecord) string {
	var hs []string
	for _, r := range recs {
		hs = append(hs, r.Host)
	}
	return strings.Join(hs, " ")
}

func TestEgressLog(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.AddEgress(egressRecord("a.test", "coder", "webapp"))
	d.AddEgress(egressRecord("b.test", "writer", "docs"))
	d.AddEgress(egressRecord("c.test", "coder", "api"))
	d.AddEgress(egressRecord("d.test", "coder", "webapp"))
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	c := client.New(socket)
	read := func(q client.EgressLogQuery) string {
		t.Helper()
		var got []localapi.EgressRecord
		if err := c.EgressLog(t.Context(), q, func(r localapi.EgressRecord) error {
			got = append(got, r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return hosts(got)
	}
	tests := []struct {
		name string
		q    client.EgressLogQuery
		want string
	}{
		{"all", client.EgressLogQuery{Tail: -1}, "a.test b.test c.test d.test"},
		{"profile", client.EgressLogQuery{Tail: -1, Profile: "coder"}, "a.test c.test d.test"},
		{"workspace", client.EgressLogQuery{Tail: -1, Workspace: "webapp"}, "a.test d.test"},
		{"both", client.EgressLogQuery{Tail: -1, Profile: "coder", Workspace: "api"}, "c.test"},
		{"tail", client.EgressLogQuery{Tail: 2}, "c.test d.test"},
		{"tail_of_a_profile", client.EgressLogQuery{Tail: 1, Profile: "writer"}, "b.test"},
		{"tail_zero", client.EgressLogQuery{Tail: 0}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := read(tc.q); got != tc.want {
				t.Errorf("EgressLog(%+v) = %q, want %q", tc.q, got, tc.want)
			}
		})
	}

	if code, _, body := call(t, socket, http.MethodGet, localapi.EgressLogPath+"?tail=-1", ""); code != http.StatusBadRequest {
		t.Errorf("tail=-1: %d %s, want 400", code, body)
	}
	if code, _, _ := call(t, socket, http.MethodPost, localapi.EgressLogPath, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", code)
	}
}

func TestEgressLogFollows(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.AddEgress(egressRecord("old.test", "coder", "webapp"))
	d.AddEgress(egressRecord("older-other.test", "writer", "docs"))
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	c := client.New(socket)
	w := startWatch(t, func(ctx context.Context, fn func(localapi.EgressRecord) error) error {
		return c.EgressLog(ctx, client.EgressLogQuery{Follow: true, Tail: 1, Profile: "coder"}, fn)
	})
	if got := w.next(t).Host; got != "old.test" {
		t.Fatalf("first record %q, want old.test", got)
	}
	d.AddEgress(egressRecord("other.test", "writer", "docs"))
	d.AddEgress(egressRecord("new.test", "coder", "webapp"))
	if got := w.next(t).Host; got != "new.test" {
		t.Fatalf("followed %q, want new.test", got)
	}
	if err := w.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
}

func TestEgressLogWithoutAProxy(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.NoEgressProxy()
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	err := client.New(socket).EgressLog(t.Context(), client.EgressLogQuery{Tail: -1}, func(localapi.EgressRecord) error { return nil })
	var le *localapi.Error
	if !errors.As(err, &le) || le.Code != localapi.CodeNotSupported {
		t.Errorf("EgressLog = %v, want NOT_SUPPORTED", err)
	}
}
