package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueBuckets are the bounds, in seconds, of the work queue histograms:
// 10µs to 10s in 1-2.5-5 steps. A key usually waits microseconds for a
// worker; a slow reconcile takes seconds.
var queueBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Workqueue is a workqueue.MetricsProvider whose metrics are labelled by
// queue name (reconcile names a controller's queue after the controller)
// and collected by the registry New builds. Pass it as
// reconcile.Options.MetricsProvider to every controller, then to New as
// Options.Workqueue. It is safe for concurrent use.
//
// The queue's unfinished-work gauges are not kept here: reconcile's queues
// never run the loop that sets them, and the controllers' collector
// exports the same two families from Stats (see unfinishedDesc).
type Workqueue struct {
	depth        *prometheus.GaugeVec
	adds         *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	workDuration *prometheus.HistogramVec
	retries      *prometheus.CounterVec
}

var (
	_ workqueue.MetricsProvider = (*Workqueue)(nil)
	_ prometheus.Collector      = (*Workqueue)(nil)
)

// NewWorkqueue returns a provider with no queues yet.
func NewWorkqueue() *Workqueue {
	name := []string{"name"}
	return &Workqueue{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "marshal_workqueue_depth",
			Help: "Keys waiting in a work queue for a worker.",
		}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marshal_workqueue_adds_total",
			Help: "Keys added to a work queue; adding a key that is already waiting is not counted.",
		}, name),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marshal_workqueue_queue_duration_seconds",
			Help:    "How long a key waited in a work queue before a worker took it.",
			Buckets: queueBuckets,
		}, name),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marshal_workqueue_work_duration_seconds",
			Help:    "How long a worker took to process a key.",
			Buckets: queueBuckets,
		}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marshal_workqueue_retries_total",
			Help: "Keys added to a work queue after a delay: retries after a failure and requeues after a while.",
		}, name),
	}
}

// NewDepthMetric implements workqueue.MetricsProvider.
func (w *Workqueue) NewDepthMetric(name string) workqueue.GaugeMetric {
	return w.depth.WithLabelValues(name)
}

// NewAddsMetric implements workqueue.MetricsProvider.
func (w *Workqueue) NewAddsMetric(name string) workqueue.CounterMetric {
	return w.adds.WithLabelValues(name)
}

// NewLatencyMetric implements workqueue.MetricsProvider.
func (w *Workqueue) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return w.latency.WithLabelValues(name)
}

// NewWorkDurationMetric implements workqueue.MetricsProvider.
func (w *Workqueue) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return w.workDuration.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric implements workqueue.MetricsProvider
// with a gauge that drops what it is set to.
func (w *Workqueue) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return discard{}
}

// NewLongestRunningProcessorSecondsMetric implements
// workqueue.MetricsProvider with a gauge that drops what it is set to.
func (w *Workqueue) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return discard{}
}

// discard is a settable gauge that keeps nothing.
type discard struct{}

func (discard) Set(float64) {}

// NewRetriesMetric implements workqueue.MetricsProvider.
func (w *Workqueue) NewRetriesMetric(name string) workqueue.CounterMetric {
	return w.retries.WithLabelValues(name)
}

// Describe implements prometheus.Collector.
func (w *Workqueue) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range w.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (w *Workqueue) Collect(ch chan<- prometheus.Metric) {
	for _, c := range w.collectors() {
		c.Collect(ch)
	}
}

func (w *Workqueue) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.depth, w.adds, w.latency, w.workDuration, w.retries}
}
