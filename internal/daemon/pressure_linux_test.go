//go:build linux

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"regexp"
	"sync"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/admission/pressure"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// busySampler is a host whose CPU is fully contended and whose memory
// and disk are healthy: the pressure a test injects instead of the
// machine's own.
type busySampler struct {
	mu  sync.Mutex
	cpu int
}

func (s *busySampler) Sample(context.Context) (pressure.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return pressure.Sample{
		CPUSomeBP: s.cpu, MemTotal: 32 << 30, MemAvailable: 20 << 30,
		DiskCapacity: 100 << 30, DiskAvailable: 40 << 30,
	}, nil
}

const pressureManifests = `apiVersion: marshal.dev/v1alpha1
kind: Host
metadata: {name: box}
spec:
  capacity: {cpu_milli: 1500, memory_bytes: 8589934592, tasks: 4096}
---
apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: coder}
---
apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: web}
spec:
  root: ROOT
  profile: coder
  resources:
    participation: required
    request: {cpu_milli: 1000}
`

// Pressure explains itself: a busy CPU halves the target (and never
// closes admission), the Host says so and since when, an event marks the
// change, and a refusal it causes names it.
func TestPressureExplainsItself(t *testing.T) {
	w := newWorld(t, "64")
	cfg := w.cfg
	cfg.Pressure, cfg.pressureSampler = PressureHost, &busySampler{cpu: 10000}
	start(t, cfg)

	c := client.New(cfg.Socket)
	var host v1alpha1.Host
	// Ready: the authority has the Host's capacity and the probed plan,
	// so a run is decided rather than refused as unavailable.
	watchUntil(t, c, "hosts", &host, "the Host's admission ready and constrained", func() bool {
		a := host.Status.Admission
		return a != nil && a.Ready && a.Pressure == "constrained" && a.Target.CPUMilli == 750
	})
	var ws v1alpha1.Workspace
	watchUntil(t, c, "workspaces", &ws, "the workspace Ready", func() bool {
		c := controllers.FindCondition(ws.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == v1alpha1.ConditionTrue
	})
	a := host.Status.Admission
	if a.PressureReason != "cpu_stall" || a.PressureMessage != "cpu pressure" || a.PressureSince.IsZero() {
		t.Errorf("admission = %+v, want cpu_stall, \"cpu pressure\", a since", a)
	}

	// The event is recorded after the change it marks: wait for it.
	var event v1alpha1.Event
	ectx, stop := context.WithTimeout(t.Context(), testutil.Deadline)
	defer stop()
	err := c.WatchEvents(ectx, v1alpha1.ObjectReference{Kind: v1alpha1.KindHost, Name: "box"}, 0, func(e v1alpha1.Event) error {
		if e.Reason != ReasonPressureConstrained {
			return nil
		}
		event = e
		return errDone
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("waiting for the %s event: %v", ReasonPressureConstrained, err)
	}
	if event.Type != v1alpha1.EventWarning || event.Message != "cpu pressure: the admission target is half the work capacity" {
		t.Errorf("event = %s %q, want Warning saying why", event.Type, event.Message)
	}

	why := regexp.MustCompile(`^cpu_milli requested 1000, free 750 of 750 \(cpu pressure: target 750 of 1500 since \d+s\)$`)
	res := postRun(t, cfg.Socket, localapi.RunRequest{Workspace: "web", Argv: []string{"true"}, Explain: true})
	if res.Explain == nil || !why.MatchString(res.Explain.Admission.Shortage) {
		t.Errorf("explain = %+v %+v, want a shortage matching %s", res.Explain, res.Refusal, why)
	}
	res = postRun(t, cfg.Socket, localapi.RunRequest{Workspace: "web", Argv: []string{"true"}})
	if r := res.Refusal; r == nil || r.Code != localapi.RefusalResourceUnavailable || r.State != localapi.AttemptDenied || !why.MatchString(r.Detail) {
		t.Errorf("run = %+v, want RESOURCE_UNAVAILABLE, denied, a detail matching %s", res.Refusal, why)
	}
}

var errDone = errors.New("done")

// watchUntil watches kind through the API, decoding each object into
// obj, until cond holds.
func watchUntil(t *testing.T, c *client.Client, kind string, obj any, what string, cond func() bool) {
	t.Helper()
	ctx, stop := context.WithTimeout(t.Context(), testutil.Deadline)
	defer stop()
	err := c.Watch(ctx, kind, func(ev localapi.WatchEvent) error {
		if err := json.Unmarshal(ev.Object, obj); err != nil {
			return err
		}
		if cond() {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("waiting for %s: %v (last %+v)", what, err, obj)
	}
}

// postRun sends a run request over the socket as marshalctl does and
// returns the answer.
func postRun(t *testing.T, socket string, req localapi.RunRequest) localapi.RunResult {
	t.Helper()
	req.Env = [][]byte{[]byte("PATH=/usr/bin:/bin")}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://marshald"+localapi.RunPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res localapi.RunResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("decoding the run answer (HTTP %d): %v", resp.StatusCode, err)
	}
	return res
}
