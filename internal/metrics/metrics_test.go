package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/version"
	"github.com/marshal-dev/marshal/reconcile"
)

func TestNewRejectsBadControllers(t *testing.T) {
	a, err := reconcile.NewController("profile", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		ctrls []Controller
		want  string
	}{
		{name: "nil_controller", ctrls: []Controller{a, nil}, want: "controller 1 is nil"},
		{name: "duplicate_name", ctrls: []Controller{a, a}, want: `two controllers are named "profile"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Controllers: tc.ctrls})
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want ErrInvalidOptions saying %q", err, tc.want)
			}
		})
	}
}

// everything returns metrics with every option set and something in
// each, and a scrape of them.
func everything(t *testing.T) (*Metrics, scrape) {
	t.Helper()
	wq := NewWorkqueue()
	ctrl, err := reconcile.NewController("profile", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.Options{MetricsProvider: wq})
	if err != nil {
		t.Fatal(err)
	}
	wq.NewDepthMetric("profile")
	wq.NewAddsMetric("profile")
	wq.NewLatencyMetric("profile")
	wq.NewWorkDurationMetric("profile")
	wq.NewUnfinishedWorkSecondsMetric("profile")
	wq.NewLongestRunningProcessorSecondsMetric("profile")
	wq.NewRetriesMetric("profile")
	desired := reconcile.NewDesiredStore()
	declare(t, desired, v1alpha1.KindProfile, "coder")
	agents := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentStatus]{})
	m, err := New(Options{
		Controllers: []Controller{ctrl},
		Workqueue:   wq,
		Agents:      agents,
		Declared:    desired,
		Config:      ConfigSourceFunc(func() ConfigState { return ConfigState{Files: 1} }),
		Admission:   AdmissionSourceFunc(func() AdmissionState { return AdmissionState{Ready: true} }),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveAdmission("prepared")
	m.ObserveLaunch("started", 0)
	m.ObserveEgress("coder", "allow", 40*time.Microsecond)
	m.AddEgressBytes("coder", 10, 20)
	m.ObserveControl("api", "agent", "apply", ControlRefused)
	return m, get(t, server(t, m))
}

// TestNamesFollowConventions runs Prometheus' own linter over a scrape of
// every metric, and checks the names the issue and the dashboards rely on.
func TestNamesFollowConventions(t *testing.T) {
	_, s := everything(t)
	var fams []*dto.MetricFamily
	for name, f := range s {
		if strings.HasPrefix(name, "marshal_") {
			fams = append(fams, f)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := []string{
		"marshal_admission_capacity", "marshal_admission_charged_attempts", "marshal_admission_committed",
		"marshal_admission_free", "marshal_admission_ready", "marshal_admission_target", "marshal_admissions_total",
		"marshal_agents_live", "marshal_build_info",
		"marshal_config_files", "marshal_config_held", "marshal_config_load_errors", "marshal_control_requests_total",
		"marshal_controller_active_workers", "marshal_controller_reconcile_duration_seconds",
		"marshal_controller_reconcile_errors_total", "marshal_controller_reconciles_total",
		"marshal_controller_requeues_total", "marshal_declared_objects",
		"marshal_egress_bytes_total", "marshal_egress_connections_total", "marshal_egress_decision_seconds",
		"marshal_launch_duration_seconds",
		"marshal_workqueue_adds_total", "marshal_workqueue_depth", "marshal_workqueue_longest_running_processor_seconds",
		"marshal_workqueue_queue_duration_seconds", "marshal_workqueue_retries_total",
		"marshal_workqueue_unfinished_work_seconds", "marshal_workqueue_work_duration_seconds",
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.GetName())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("marshal_ families = %q\nwant %q", got, want)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_requests_total"} {
		if _, ok := s[name]; !ok {
			t.Errorf("no %s: the runtime, process and handler collectors are missing", name)
		}
	}
}

func TestBuildInfo(t *testing.T) {
	_, s := everything(t)
	v := version.Get()
	if s.find("marshal_build_info", "version", v.Version, "commit", v.Commit, "goversion", v.GoVersion) == nil {
		t.Errorf("marshal_build_info lacks version %q, commit %q, goversion %q: %v", v.Version, v.Commit, v.GoVersion, s["marshal_build_info"])
	}
}

// TestServedOnUnixSocket gives Handler to the local API server, as
// marshald does, and scrapes it over the unix socket: the peer check
// applies, and the answer parses.
func TestServedOnUnixSocket(t *testing.T) {
	m, _ := everything(t)
	socket := filepath.Join(testutil.ShortDir(t), "marshal.sock")
	ln, err := apiserver.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := apiserver.New(apiservertest.NewDaemon(), apiserver.Options{Metrics: m.Handler()})
	apiservertest.ServeOn(t, srv, ln)

	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://marshald/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics over the socket: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fams["marshal_controller_reconciles_total"]; !ok {
		t.Errorf("the socket's /metrics has no marshal_controller_reconciles_total")
	}
}

func TestEgressCountsPerProfileAndVerdict(t *testing.T) {
	_, s := everything(t)
	if c := s.find("marshal_egress_connections_total", "profile", "coder", "verdict", "allow"); c == nil || c.GetCounter().GetValue() != 1 {
		t.Errorf("marshal_egress_connections_total{coder,allow} = %v, want 1", c)
	}
	for dir, want := range map[string]float64{"out": 10, "in": 20} {
		if c := s.find("marshal_egress_bytes_total", "profile", "coder", "direction", dir); c == nil || c.GetCounter().GetValue() != want {
			t.Errorf("marshal_egress_bytes_total{coder,%s} = %v, want %v", dir, c, want)
		}
	}
	if h := s["marshal_egress_decision_seconds"]; h == nil || h.GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("marshal_egress_decision_seconds = %v, want one sample", h)
	}
}
