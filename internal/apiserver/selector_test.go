package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

func labelled(name string, labels map[string]string) any {
	p := profile(name, 1000)
	p.Metadata.Labels = labels
	return p
}

func names(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, item := range items {
		var v struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := json.Unmarshal(item, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Metadata.Name)
	}
	return out
}

func TestListSelector(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.Set(labelled("coder", map[string]string{"team": "platform", "tier": "gold"}))
	d.Set(labelled("writer", map[string]string{"team": "docs"}))
	d.Set(labelled("plain", nil))
	c := client.New(apiservertest.Serve(t, d, apiserver.Options{}))
	tests := []struct {
		selector string
		want     []string
	}{
		{"", []string{"coder", "plain", "writer"}},
		{"team=platform", []string{"coder"}},
		{"team!=platform", []string{"plain", "writer"}},
		{"team", []string{"coder", "writer"}},
		{"!team", []string{"plain"}},
		{"team in (docs, platform),tier", []string{"coder"}},
		{"team notin (docs)", []string{"coder", "plain"}},
	}
	for _, tc := range tests {
		items, err := c.ListSelected(t.Context(), "profiles", tc.selector)
		if err != nil {
			t.Fatalf("ListSelected(%q): %v", tc.selector, err)
		}
		if got := names(t, items); !slices.Equal(got, tc.want) {
			t.Errorf("ListSelected(%q) = %q, want %q", tc.selector, got, tc.want)
		}
	}
	_, err := c.ListSelected(t.Context(), "profiles", "team in docs")
	var apiErr *localapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeBadRequest {
		t.Errorf("ListSelected of a selector that does not parse = %v, want BAD_REQUEST", err)
	}
}

// TestWatchSelector watches a selection: an object that stops matching
// is DELETED, one that starts is ADDED.
func TestWatchSelector(t *testing.T) {
	d := apiservertest.NewDaemon()
	d.Set(labelled("coder", map[string]string{"team": "platform"}))
	d.Set(labelled("writer", nil))
	c := client.New(apiservertest.Serve(t, d, apiserver.Options{}))
	var got []string
	stop := errors.New("stop")
	started := false
	err := c.WatchSelected(t.Context(), "profiles", "team=platform", func() error {
		started = true
		return nil
	}, func(ev localapi.WatchEvent) error {
		got = append(got, ev.Type+" "+names(t, []json.RawMessage{ev.Object})[0])
		switch len(got) {
		case 1:
			d.Set(labelled("writer", map[string]string{"team": "platform"}))
		case 2:
			d.Set(labelled("coder", map[string]string{"team": "docs"}))
		case 3:
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !started {
		t.Fatalf("WatchSelected = %v (started %v), want the callback's error", err, started)
	}
	want := []string{"ADDED coder", "ADDED writer", "DELETED coder"}
	if !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestWatchStartedErrorEndsTheWatch(t *testing.T) {
	d := apiservertest.NewDaemon()
	c := client.New(apiservertest.Serve(t, d, apiserver.Options{}))
	stop := errors.New("stop")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := c.WatchSelected(ctx, "profiles", "", func() error { return stop }, func(localapi.WatchEvent) error { return nil })
	if !errors.Is(err, stop) {
		t.Errorf("WatchSelected = %v, want started's error", err)
	}
}

func TestRender(t *testing.T) {
	c := client.New(apiservertest.Serve(t, apiservertest.NewDaemon(), apiserver.Options{}))
	doc := json.RawMessage(`{"metadata":{"name":"coder","labels":{"team":"platform"}},"spec":{"limits":{"memory_bytes":4294967296,"ratio":0.5}},
		"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Invalid","status":"False"}]}}`)
	list := json.RawMessage(`{"kind":"List","items":[` + string(doc) + `,{"metadata":{"name":"writer"}}]}`)

	res, err := c.Render(t.Context(), localapi.RenderRequest{
		Template:  `{range .items[*]}{.metadata.name}={.spec.limits.memory_bytes}{"\n"}{end}`,
		Documents: []json.RawMessage{list},
	})
	if err != nil || !slices.Equal(res.Outputs, []string{"coder=4294967296\nwriter=\n"}) {
		t.Errorf("Render(template) = %q, %v", res.Outputs, err)
	}
	res, err = c.Render(t.Context(), localapi.RenderRequest{
		Columns: []string{`{.metadata.name}`, `{.status.conditions[?(@.type=="Ready")].status}`,
			`{.status.conditions[*].type}`, `{.spec.limits.ratio}`, `{.metadata.labels.team}`},
		Documents: []json.RawMessage{doc, json.RawMessage(`{"metadata":{"name":"writer"}}`)},
	})
	want := [][]string{{"coder", "True", "Ready,Invalid", "0.5", "platform"}, {"writer", "<none>", "<none>", "<none>", "<none>"}}
	if err != nil || len(res.Cells) != 2 || !slices.Equal(res.Cells[0], want[0]) || !slices.Equal(res.Cells[1], want[1]) {
		t.Errorf("Render(columns) = %q, %v; want %q", res.Cells, err, want)
	}
	for _, req := range []localapi.RenderRequest{
		{Template: "{.items[", Documents: []json.RawMessage{doc}},
		{Columns: []string{"{.a"}, Documents: []json.RawMessage{doc}},
		{Documents: []json.RawMessage{doc}},
	} {
		_, err := c.Render(t.Context(), req)
		var apiErr *localapi.Error
		if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeBadRequest {
			t.Errorf("Render(%+v) = %v, want BAD_REQUEST", req, err)
		}
	}
}
