package apiserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

var created = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func profile(name string, cpu int64) *v1alpha1.Profile {
	p := v1alpha1.New(v1alpha1.KindProfile).(*v1alpha1.Profile)
	p.Metadata.Name = name
	p.Metadata.CreationTimestamp = created
	p.Spec.Limits = &v1alpha1.Limits{CPUMilli: &cpu}
	p.Default()
	p.Status.Agents = 2
	p.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue, Reason: "SliceReady"}}
	return p
}

func event(seq uint64, kind, name, reason string) v1alpha1.Event {
	return v1alpha1.Event{
		Seq: seq, Type: v1alpha1.EventNormal, Reason: reason, Message: reason + " happened", Count: 1,
		Object: v1alpha1.ObjectReference{Kind: kind, Name: name}, FirstSeen: created, LastSeen: created,
	}
}

// rawClient talks HTTP on socket, one connection per request.
func rawClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
}

func call(t *testing.T, socket, method, path, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://marshald"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rawClient(socket).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(data)
}

func applyBody(name, data string) string {
	return fmt.Sprintf(`{"files":[{"name":%q,"data":%q}]}`, name, base64.StdEncoding.EncodeToString([]byte(data)))
}

const writerManifest = "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: writer}\nspec: {}\n"

func TestRoutes(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.SetInfo(localapi.Info{Version: "test", Mode: "user"})
	d.SetDoctor(localapi.Doctor{Backend: "cgroupfs", Checks: []localapi.Check{{Name: "cgroup v2", OK: true}}})
	d.Set(profile("coder", 2000))
	d.Record(event(0, "Profile", "coder", "SliceCreated"))
	d.Record(event(0, "Workspace", "webapp", "RootMissing"))
	d.UseConfigDir(t.TempDir())
	socket := apiservertest.Serve(t, d, apiserver.Options{MaxBodyBytes: 4096})

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		want   string // in the body
	}{
		{name: "info", method: "GET", path: "/v1/info", status: 200, want: `"version":"test"`},
		{name: "info_wrong_method", method: "POST", path: "/v1/info", status: 405, want: `"code":"BAD_REQUEST"`},
		{name: "list_by_plural", method: "GET", path: "/v1/objects/profiles", status: 200, want: `"kind":"ProfileList","items":[{"apiVersion":"marshal.dev/v1alpha1","kind":"Profile","metadata":{"name":"coder"`},
		{name: "list_by_short_name", method: "GET", path: "/v1/objects/prof", status: 200, want: `"name":"coder"`},
		{name: "list_empty", method: "GET", path: "/v1/objects/workspaces", status: 200, want: `"items":[]`},
		{name: "list_unknown_resource", method: "GET", path: "/v1/objects/pods", status: 404,
			want: `{"code":"NOT_FOUND","message":"unknown resource \"pods\"; known: profiles, workspaces, hosts, consumers, agents"}`},
		{name: "list_wrong_method", method: "DELETE", path: "/v1/objects/profiles", status: 405, want: "use GET"},
		{name: "get", method: "GET", path: "/v1/objects/profiles/coder", status: 200, want: `"agents":2`},
		{name: "get_missing", method: "GET", path: "/v1/objects/profiles/nope", status: 404,
			want: `{"code":"NOT_FOUND","message":"profiles \"nope\" not found"}`},
		{name: "objects_without_resource", method: "GET", path: "/v1/objects/", status: 404, want: `"code":"NOT_FOUND"`},
		{name: "objects_too_deep", method: "GET", path: "/v1/objects/profiles/coder/x", status: 404, want: `"code":"NOT_FOUND"`},
		{name: "watch_bad_value", method: "GET", path: "/v1/objects/profiles?watch=maybe", status: 400, want: `"code":"BAD_REQUEST"`},
		{name: "events_all", method: "GET", path: "/v1/events", status: 200, want: `"reason":"RootMissing"`},
		{name: "events_of_object", method: "GET", path: "/v1/events?kind=ws&name=webapp", status: 200, want: `{"items":[{"seq":2,`},
		{name: "events_after", method: "GET", path: "/v1/events?after=2", status: 200, want: `{"items":[]}`},
		{name: "events_name_without_kind", method: "GET", path: "/v1/events?name=webapp", status: 400, want: "name needs kind too"},
		{name: "events_bad_after", method: "GET", path: "/v1/events?after=-1", status: 400, want: "want a sequence number"},
		{name: "apply", method: "POST", path: "/v1/apply", body: applyBody("w.yaml", writerManifest), status: 200,
			want: `{"outcomes":[{"kind":"Profile","name":"writer","action":"created","file":"applied/profile-writer.yaml"}]}`},
		{name: "apply_invalid_manifest", method: "POST", path: "/v1/apply", body: applyBody("w.yaml", "kind: Pod\n"), status: 200,
			want: `"errors":[{"file":"w.yaml","line":1`},
		{name: "apply_wrong_method", method: "GET", path: "/v1/apply", status: 405, want: "use POST"},
		{name: "apply_unknown_field", method: "POST", path: "/v1/apply", body: `{"filez":[]}`, status: 400, want: `unknown field \"filez\"`},
		{name: "apply_trailing_data", method: "POST", path: "/v1/apply", body: `{} {}`, status: 400, want: "unexpected data after the JSON value"},
		{name: "apply_empty_body", method: "POST", path: "/v1/apply", status: 400, want: "request body is empty"},
		{name: "apply_too_large", method: "POST", path: "/v1/apply", body: applyBody("w.yaml", strings.Repeat("#", 5000)), status: 413,
			want: "over the limit of 4096 bytes"},
		{name: "delete", method: "POST", path: "/v1/delete", body: `{"kind":"Profile","name":"nope"}`, status: 200, want: `"action":"not_found"`},
		{name: "confirm_empty", method: "POST", path: "/v1/confirm-empty", status: 200, want: `{"released":false}`},
		{name: "doctor", method: "GET", path: "/v1/doctor", status: 200, want: `"backend":"cgroupfs"`},
		{name: "run_wrong_method", method: "GET", path: "/v1/run", status: 405, want: "use POST"},
		{name: "run_without_argv", method: "POST", path: "/v1/run", body: `{"workspace":"web","argv":[]}`, status: 400,
			want: `{"code":"INVALID","message":"a run needs argv and a timeout that is not negative"}`},
		{name: "run_negative_timeout", method: "POST", path: "/v1/run", body: `{"workspace":"web","argv":["true"],"timeoutMS":-1}`, status: 400,
			want: `"code":"INVALID"`},
		{name: "run_unknown_field", method: "POST", path: "/v1/run", body: `{"argv":["true"],"argz":[]}`, status: 400, want: `unknown field \"argz\"`},
		{name: "run_empty_body", method: "POST", path: "/v1/run", status: 400, want: "request body is empty"},
		{name: "backup_wrong_method", method: "POST", path: "/v1/admin/backup", status: 405, want: "use GET"},
		{name: "metrics_not_served", method: "GET", path: "/metrics", status: 404, want: `"code":"NOT_FOUND"`},
		{name: "unknown_route", method: "GET", path: "/v2/nothing", status: 404, want: `{"code":"NOT_FOUND","message":"no route /v2/nothing"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, header, body := call(t, socket, tc.method, tc.path, tc.body)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s = %d %s, want %d with %s", tc.method, tc.path, status, body, tc.status, tc.want)
			}
			if ct := header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: Content-Type %q, want application/json", tc.method, tc.path, ct)
			}
			if status == 405 && header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
			}
		})
	}
}

// failingDaemon answers Apply with err.
type failingDaemon struct {
	*apiservertest.Daemon
	err error
}

func (f *failingDaemon) Apply(context.Context, localapi.ApplyRequest) (localapi.ApplyResult, error) {
	return localapi.ApplyResult{}, f.err
}

func TestErrorsMapToCodes(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{name: "not_found", err: fmt.Errorf("x: %w", apiserver.ErrNotFound), status: 404, code: localapi.CodeNotFound},
		{name: "invalid", err: fmt.Errorf("x: %w", apiserver.ErrInvalid), status: 400, code: localapi.CodeInvalid},
		{name: "conflict", err: fmt.Errorf("x: %w", apiserver.ErrConflict), status: 409, code: localapi.CodeConflict},
		{name: "unavailable", err: fmt.Errorf("x: %w", apiserver.ErrUnavailable), status: 503, code: localapi.CodeUnavailable},
		{name: "canceled", err: fmt.Errorf("x: %w", context.Canceled), status: 503, code: localapi.CodeUnavailable},
		{name: "not_supported", err: fmt.Errorf("x: %w", apiserver.ErrNotSupported), status: 501, code: localapi.CodeNotSupported},
		{name: "unsupported", err: fmt.Errorf("x: %w", errors.ErrUnsupported), status: 501, code: localapi.CodeNotSupported},
		{name: "anything_else", err: errors.New("disk on fire"), status: 500, code: localapi.CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket := apiservertest.Serve(t, &failingDaemon{Daemon: apiservertest.NewDaemon(), err: tc.err}, apiserver.Options{})
			status, _, body := call(t, socket, "POST", "/v1/apply", `{"files":[]}`)
			want := (&localapi.Error{Code: tc.code, Message: tc.err.Error()})
			wantBody, _ := json.Marshal(want)
			if status != tc.status || strings.TrimSpace(body) != string(wantBody) {
				t.Errorf("Apply failing with %v = %d %s, want %d %s", tc.err, status, body, tc.status, wantBody)
			}
			// The client hands the same error back.
			_, err := client.New(socket).Apply(t.Context(), localapi.ApplyRequest{})
			var got *localapi.Error
			if !errors.As(err, &got) || *got != *want {
				t.Errorf("client Apply = %v, want %v", err, want)
			}
		})
	}
}

// watcher runs a watch in the background and hands its events over.
type watcher[T any] struct {
	events chan T
	cancel context.CancelFunc
	done   chan error
}

func startWatch[T any](t *testing.T, watch func(ctx context.Context, fn func(T) error) error) *watcher[T] {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &watcher[T]{events: make(chan T, 64), cancel: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- watch(ctx, func(ev T) error {
			w.events <- ev
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

func (w *watcher[T]) next(t *testing.T) T {
	t.Helper()
	select {
	case ev := <-w.events:
		return ev
	case err := <-w.done:
		t.Fatalf("watch ended: %v", err)
	case <-time.After(testutil.Deadline):
		t.Fatalf("no watch event after %v", testutil.Deadline)
	}
	panic("unreachable")
}

// stop cancels the watch and returns what it returned.
func (w *watcher[T]) stop(t *testing.T) error {
	t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		return err
	case <-time.After(testutil.Deadline):
		t.Fatalf("watch did not end after %v", testutil.Deadline)
	}
	return nil
}

func summary(t *testing.T, ev localapi.WatchEvent) string {
	t.Helper()
	var p v1alpha1.Profile
	if err := json.Unmarshal(ev.Object, &p); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %s cpu=%d", ev.Type, p.Metadata.Name, *p.Spec.Limits.CPUMilli)
}

func TestWatchObjects(t *testing.T) {
	// The daemon names the objects that changed, or, unnamed, the watch
	// lists the kind again: the events are the same.
	for _, unnamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("unnamed=%v", unnamed), func(t *testing.T) {
			d := apiservertest.NewDaemon()
			if unnamed {
				d.Unnamed("Profile")
			}
			d.Set(profile("a", 1000))
			socket := apiservertest.Serve(t, d, apiserver.Options{})
			c := client.New(socket)
			w := startWatch(t, func(ctx context.Context, fn func(localapi.WatchEvent) error) error {
				return c.Watch(ctx, "profiles", fn)
			})
			steps := []struct {
				change func()
				want   string
			}{
				{change: func() {}, want: "ADDED a cpu=1000"},
				{change: func() { d.Set(profile("b", 500)) }, want: "ADDED b cpu=500"},
				{change: func() { d.Set(profile("a", 1500)) }, want: "MODIFIED a cpu=1500"},
				// A change that encodes the same sends nothing: the next
				// event is the deletion after it.
				{change: func() { d.Set(profile("a", 1500)); d.Remove("Profile", "b") }, want: "DELETED b cpu=500"},
			}
			for i, s := range steps {
				s.change()
				if got := summary(t, w.next(t)); got != s.want {
					t.Fatalf("step %d: event %q, want %q", i, got, s.want)
				}
			}
			if err := w.stop(t); !errors.Is(err, context.Canceled) {
				t.Errorf("Watch after cancel returned %v, want context.Canceled", err)
			}
			select {
			case ev := <-w.events:
				t.Errorf("unexpected event %s", summary(t, ev))
			default:
			}
		})
	}
}

func TestWatchEvents(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.Record(event(0, "Profile", "coder", "SliceCreated"))
	d.Record(event(0, "Workspace", "webapp", "RootMissing"))
	socket := apiservertest.Serve(t, d, apiserver.Options{})
	c := client.New(socket)

	all := startWatch(t, func(ctx context.Context, fn func(v1alpha1.Event) error) error {
		return c.WatchEvents(ctx, v1alpha1.ObjectReference{}, 0, fn)
	})
	coder := startWatch(t, func(ctx context.Context, fn func(v1alpha1.Event) error) error {
		return c.WatchEvents(ctx, v1alpha1.ObjectReference{Kind: "profile", Name: "coder"}, 0, fn)
	})
	show := func(e v1alpha1.Event) string {
		return fmt.Sprintf("%d %s/%s %s x%d", e.Seq, e.Object.Kind, e.Object.Name, e.Reason, e.Count)
	}
	expect := func(w *watcher[v1alpha1.Event], want ...string) {
		t.Helper()
		for _, s := range want {
			if got := show(w.next(t)); got != s {
				t.Fatalf("event %q, want %q", got, s)
			}
		}
	}
	expect(all, "1 Profile/coder SliceCreated x1", "2 Workspace/webapp RootMissing x1")
	expect(coder, "1 Profile/coder SliceCreated x1")

	d.Record(event(0, "Workspace", "webapp", "Ready"))
	repeat := event(0, "Profile", "coder", "SliceCreated")
	repeat.Count = 2
	d.Record(repeat)
	expect(all, "3 Workspace/webapp Ready x1", "4 Profile/coder SliceCreated x2")
	expect(coder, "4 Profile/coder SliceCreated x2")

	// A listing after seq 3 holds only the repeat.
	evs, err := c.Events(t.Context(), v1alpha1.ObjectReference{}, 3)
	if err != nil || len(evs) != 1 || show(evs[0]) != "4 Profile/coder SliceCreated x2" {
		t.Errorf("Events(after 3) = %v, %v", evs, err)
	}
}

func TestServeStopsWatchesAndReturnsNil(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.Set(profile("a", 1000))
	socket := filepath.Join(testutil.ShortDir(t), "s.sock")
	ln, err := apiserver.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- apiserver.New(d, apiserver.Options{}).Serve(ctx, ln) }()

	c := client.New(socket)
	w := startWatch(t, func(ctx context.Context, fn func(localapi.WatchEvent) error) error {
		return c.Watch(ctx, "profiles", fn)
	})
	w.next(t)
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatal("Serve did not return after its context ended")
	}
	select {
	case err := <-w.done:
		w.done <- err
		if !errors.Is(err, client.ErrStreamEnded) {
			t.Errorf("Watch when the server stopped = %v, want ErrStreamEnded", err)
		}
	case <-time.After(testutil.Deadline):
		t.Fatal("the watch did not end when the server stopped")
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after Serve: %v", err)
	}
	if _, err := c.Info(t.Context()); !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("Info after the server stopped = %v, want ErrUnreachable", err)
	}
}

func TestServeFailsOnAClosedListener(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = apiserver.New(apiservertest.NewDaemon(), apiserver.Options{}).Serve(t.Context(), ln)
	if err == nil {
		t.Error("Serve on a closed listener = nil, want an error")
	}
}
