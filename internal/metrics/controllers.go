package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marshal-dev/marshal/reconcile"
)

// Controller is what the metrics read of a controller:
// *reconcile.Controller satisfies it.
type Controller interface {
	Name() string
	Stats() reconcile.Stats
}

var _ Controller = (*reconcile.Controller)(nil)

// Values of the kind label of marshal_controller_reconcile_errors_total.
const (
	// ErrorKindError is a failed call retried with backoff.
	ErrorKindError = "error"
	// ErrorKindTerminal is a failed call not retried (TerminalError).
	ErrorKindTerminal = "terminal"
	// ErrorKindPanic is a call that panicked, retried with backoff.
	ErrorKindPanic = "panic"
)

var (
	reconcilesDesc = prometheus.NewDesc("marshal_controller_reconciles_total",
		"Reconcile calls that returned or panicked, per controller.",
		[]string{"controller"}, nil)
	reconcileErrorsDesc = prometheus.NewDesc("marshal_controller_reconcile_errors_total",
		"Reconcile calls that failed, per controller and kind: error (retried), terminal (not retried), panic (retried).",
		[]string{"controller", "kind"}, nil)
	requeuesDesc = prometheus.NewDesc("marshal_controller_requeues_total",
		"Successful reconcile calls that asked to run again after a delay, per controller.",
		[]string{"controller"}, nil)
	activeWorkersDesc = prometheus.NewDesc("marshal_controller_active_workers",
		"Reconcile calls running now, per controller.",
		[]string{"controller"}, nil)
	reconcileDurationDesc = prometheus.NewDesc("marshal_controller_reconcile_duration_seconds",
		"Duration of reconcile calls, per controller.",
		[]string{"controller"}, nil)
	// The two that follow keep the work queue's names and label: a
	// controller's queue is named after it, and these are the figures
	// client-go's queue would report, computed at scrape time instead of
	// by a loop that wakes every queue twice a second.
	unfinishedDesc = prometheus.NewDesc("marshal_workqueue_unfinished_work_seconds",
		"Seconds of work in progress not yet observed by work_duration; large values mean stuck workers.",
		[]string{"name"}, nil)
	longestDesc = prometheus.NewDesc("marshal_workqueue_longest_running_processor_seconds",
		"Seconds the longest-running worker of a work queue has been processing its key.",
		[]string{"name"}, nil)
)

// controllerCollector exports the controllers' Stats when scraped.
type controllerCollector struct {
	ctrls []Controller

	// mu guards retried. Scrapes may run concurrently.
	mu sync.Mutex
	// retried is, per controller, the last count of retried non-panic
	// errors exported. Stats counts panics within Errors and reads the two
	// counters one after the other, so Errors-Panics can be briefly low
	// while a panic is being recorded; exporting the highest value seen
	// keeps the counter from going down, which Prometheus would take for a
	// restart.
	retried map[string]uint64
}

func newControllerCollector(ctrls []Controller) *controllerCollector {
	return &controllerCollector{ctrls: ctrls, retried: make(map[string]uint64, len(ctrls))}
}

func (c *controllerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reconcilesDesc
	ch <- reconcileErrorsDesc
	ch <- requeuesDesc
	ch <- activeWorkersDesc
	ch <- reconcileDurationDesc
	ch <- unfinishedDesc
	ch <- longestDesc
}

func (c *controllerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ctrl := range c.ctrls {
		name, s := ctrl.Name(), ctrl.Stats()
		ch <- prometheus.MustNewConstMetric(reconcilesDesc, prometheus.CounterValue, float64(s.Reconciles), name)
		ch <- prometheus.MustNewConstMetric(reconcileErrorsDesc, prometheus.CounterValue, float64(c.retriedErrors(name, s)), name, ErrorKindError)
		ch <- prometheus.MustNewConstMetric(reconcileErrorsDesc, prometheus.CounterValue, float64(s.TerminalErrors), name, ErrorKindTerminal)
		ch <- prometheus.MustNewConstMetric(reconcileErrorsDesc, prometheus.CounterValue, float64(s.Panics), name, ErrorKindPanic)
		ch <- prometheus.MustNewConstMetric(requeuesDesc, prometheus.CounterValue, float64(s.Requeues), name)
		ch <- prometheus.MustNewConstMetric(activeWorkersDesc, prometheus.GaugeValue, float64(s.InFlight), name)
		count, sum, buckets := histogram(s.Duration)
		ch <- prometheus.MustNewConstHistogram(reconcileDurationDesc, count, sum, buckets, name)
		ch <- prometheus.MustNewConstMetric(unfinishedDesc, prometheus.GaugeValue, s.Unfinished.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(longestDesc, prometheus.GaugeValue, s.Longest.Seconds(), name)
	}
}

// retriedErrors returns the retried errors that were not panics, never
// less than it returned before for the same controller.
func (c *controllerCollector) retriedErrors(name string, s reconcile.Stats) uint64 {
	var n uint64
	if s.Errors > s.Panics {
		n = s.Errors - s.Panics
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n = max(n, c.retried[name])
	c.retried[name] = n
	return n
}

// histogram converts a reconcile.Histogram to a Prometheus one: seconds,
// cumulative bucket counts keyed by upper bound, the overflow bucket
// counted in count alone.
func histogram(h reconcile.Histogram) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b.Seconds()] = cum
	}
	return h.Count, h.Sum.Seconds(), buckets
}
