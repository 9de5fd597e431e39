package metrics

import (
	"testing"

	"k8s.io/client-go/util/workqueue"
)

// TestWorkqueueProviderMetrics drives each metric the way a work queue
// does and checks that the scrape shows it under the queue's name. The
// unfinished-work gauges are dropped: the controllers' collector exports
// those families.
func TestWorkqueueProviderMetrics(t *testing.T) {
	wq := NewWorkqueue()
	m, err := New(Options{Workqueue: wq})
	if err != nil {
		t.Fatal(err)
	}
	url := server(t, m)

	var p workqueue.MetricsProvider = wq
	p.NewDepthMetric("agent").Inc()
	p.NewDepthMetric("agent").Inc()
	p.NewDepthMetric("agent").Dec()
	p.NewAddsMetric("agent").Inc()
	p.NewLatencyMetric("agent").Observe(0.002)
	p.NewWorkDurationMetric("agent").Observe(0.03)
	p.NewUnfinishedWorkSecondsMetric("agent").Set(2.5)
	p.NewLongestRunningProcessorSecondsMetric("agent").Set(1.5)
	p.NewRetriesMetric("agent").Inc()
	p.NewDepthMetric("host") // a second queue, idle

	s := get(t, url)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"marshal_workqueue_depth", 1},
		{"marshal_workqueue_adds_total", 1},
		{"marshal_workqueue_queue_duration_seconds", 1},
		{"marshal_workqueue_work_duration_seconds", 1},
		{"marshal_workqueue_retries_total", 1},
	} {
		if got := s.value(t, c.name, "name", "agent"); got != c.want {
			t.Errorf("%s{name=\"agent\"} = %v, want %v", c.name, got, c.want)
		}
	}
	if got := s.value(t, "marshal_workqueue_depth", "name", "host"); got != 0 {
		t.Errorf("depth of the idle queue = %v, want 0", got)
	}
	for _, name := range []string{"marshal_workqueue_unfinished_work_seconds", "marshal_workqueue_longest_running_processor_seconds"} {
		if _, ok := s[name]; ok {
			t.Errorf("the provider exports %s; want it left to the controllers' collector", name)
		}
	}
}
