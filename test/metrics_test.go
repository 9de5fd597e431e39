//go:build linux

package test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads marshald's /metrics on its socket, as
// `curl --unix-socket SOCKET http://x/metrics` would, and parses it with
// the Prometheus text parser.
func (d *daemon) scrape() map[string]*dto.MetricFamily {
	d.t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(d.get("/metrics")))
	if err != nil {
		d.t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// sample returns the value of the series of fam whose labels include
// labels (name=value pairs); for a histogram, its count. ok is false when
// there is none.
func sample(fams map[string]*dto.MetricFamily, fam string, labels ...string) (v float64, ok bool) {
	f := fams[fam]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsFollowWhatHappens scrapes marshald while things happen to
// it and checks that every metric it names is there and moves with what
// it counts.
func TestMetricsFollowWhatHappens(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy, launchWorkspace{name: "web", participation: "required"}), "web")
	before := d.scrape()
	for _, fam := range []string{
		"marshal_controller_reconciles_total", "marshal_controller_reconcile_errors_total",
		"marshal_controller_requeues_total", "marshal_controller_active_workers",
		"marshal_controller_reconcile_duration_seconds",
		"marshal_workqueue_depth", "marshal_workqueue_adds_total", "marshal_workqueue_queue_duration_seconds",
		"marshal_workqueue_work_duration_seconds", "marshal_workqueue_retries_total",
		"marshal_workqueue_unfinished_work_seconds", "marshal_workqueue_longest_running_processor_seconds",
		"marshal_agents_live", "marshal_declared_objects", "marshal_config_files",
		"marshal_config_load_errors", "marshal_config_held",
		"marshal_admission_ready", "marshal_admission_capacity", "marshal_admission_target",
		"marshal_admission_committed", "marshal_admission_free", "marshal_admission_charged_attempts",
		"marshal_build_info",
	} {
		if before[fam] == nil {
			t.Errorf("the scrape has no %s", fam)
		}
	}
	val := func(fams map[string]*dto.MetricFamily, fam string, labels ...string) float64 {
		t.Helper()
		v, _ := sample(fams, fam, labels...)
		return v
	}

	// A run: admitted, launched, live, charged; then released.
	marks := t.TempDir()
	a := d.startRun("-w", "web", "--", "sh", "-c", "touch "+marks+"/started; read line; exit 0")
	waitFiles(t, marks, "started", 1)
	during := d.scrape()
	for _, c := range []struct {
		fam    string
		labels []string
	}{
		{"marshal_admissions_total", []string{"result", "prepared"}},
		{"marshal_launch_duration_seconds", []string{"result", "started"}},
		{"marshal_agents_live", []string{"profile", "coder"}},
		{"marshal_admission_committed", []string{"resource", "memory"}},
		{"marshal_admission_charged_attempts", nil},
		{"marshal_controller_reconciles_total", []string{"controller", "agent"}},
		{"marshal_controller_reconcile_duration_seconds", []string{"controller", "agent"}},
		{"marshal_workqueue_adds_total", []string{"name", "agent"}},
		{"marshal_workqueue_queue_duration_seconds", []string{"name", "agent"}},
		{"marshal_workqueue_work_duration_seconds", []string{"name", "agent"}},
	} {
		if b, n := val(before, c.fam, c.labels...), val(during, c.fam, c.labels...); n <= b {
			t.Errorf("%s%v = %v during a run, was %v: want more", c.fam, c.labels, n, b)
		}
	}
	if b, n := val(before, "marshal_admission_free", "resource", "memory"), val(during, "marshal_admission_free", "resource", "memory"); n >= b {
		t.Errorf("free memory %v during a run, was %v: want less", n, b)
	}
	a.stdin.Close()
	if code := a.wait(t); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	d.waitSettled(t)
	after := d.scrape()
	for _, c := range []struct {
		fam    string
		labels []string
	}{
		{"marshal_agents_live", []string{"profile", "coder"}},
		{"marshal_admission_committed", []string{"resource", "memory"}},
		{"marshal_admission_charged_attempts", nil},
	} {
		if v := val(after, c.fam, c.labels...); v != val(before, c.fam, c.labels...) {
			t.Errorf("%s%v = %v after the agent ended, want %v as before", c.fam, c.labels, v, val(before, c.fam, c.labels...))
		}
	}

	// A profile whose limit the kernel refuses: reconcile errors, retries.
	d.write("tiny.yaml", "apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: tiny}\nspec: {limits: {cpu_milli: 1}}\n")
	profiles := d.watch("profiles")
	profiles.until(t, "tiny", "failing", func(o map[string]any) bool { return conditionIs(o, "Ready", "False") })
	failing := d.scrape()
	if v := val(failing, "marshal_declared_objects", "kind", "Profile"); v != val(before, "marshal_declared_objects", "kind", "Profile")+1 {
		t.Errorf("declared profiles = %v, want one more than %v", v, val(before, "marshal_declared_objects", "kind", "Profile"))
	}
	if v := val(failing, "marshal_controller_reconcile_errors_total", "controller", "profile", "kind", "error"); v < 1 {
		t.Errorf("profile reconcile errors = %v, want at least 1", v)
	}
	if v := val(failing, "marshal_workqueue_retries_total", "name", "profile"); v <= val(before, "marshal_workqueue_retries_total", "name", "profile") {
		t.Errorf("profile queue retries = %v, want more than before", v)
	}

	// A file that stops loading.
	d.write("tiny.yaml", "kind: [\n")
	d.watchLines("events", "-w").until(t, "the file's error", func(s string) bool {
		return strings.Contains(s, "tiny.yaml")
	})
	if v := val(d.scrape(), "marshal_config_load_errors"); v != 1 {
		t.Errorf("config load errors = %v, want 1", v)
	}

	// An emptied config dir: held.
	if v := val(d.scrape(), "marshal_config_held"); v != 0 {
		t.Errorf("config held = %v before any emptying, want 0", v)
	}
	events := d.watchLines("events", "-w")
	os.Remove(filepath.Join(d.config, "tiny.yaml"))
	os.Remove(filepath.Join(d.config, "all.yaml"))
	events.until(t, "the hold", func(s string) bool { return strings.Contains(s, "EmptiedHeld") })
	if v := val(d.scrape(), "marshal_config_held"); v != 1 {
		t.Errorf("config held = %v after the dir was emptied, want 1", v)
	}
}
