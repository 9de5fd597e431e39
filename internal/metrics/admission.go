package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Amounts are quantities of the resources admission reserves, in the
// units of the manifests. Its fields are those of admission.Budget, so a
// Budget converts: metrics.Amounts(snapshot.Free).
type Amounts struct {
	CPUMilli    uint64
	MemoryBytes uint64
	Tasks       uint64
}

// AdmissionState is what the admission gauges show: the authority's
// snapshot.
type AdmissionState struct {
	// Ready reports whether the authority can decide.
	Ready bool
	// Capacity is the host's work capacity; Target that capacity scaled by
	// pressure; Committed what charged attempts hold; Free what is left
	// of Target.
	Capacity, Target, Committed, Free Amounts
	// Charged counts the charged attempts.
	Charged int
}

// AdmissionSource reports the admission authority's state when metrics
// are scraped.
type AdmissionSource interface {
	AdmissionState() AdmissionState
}

// AdmissionSourceFunc adapts a function to AdmissionSource.
type AdmissionSourceFunc func() AdmissionState

// AdmissionState calls f.
func (f AdmissionSourceFunc) AdmissionState() AdmissionState { return f() }

// launchBuckets are the bounds, in seconds, of the launch duration
// histogram: from a bare launch (a few milliseconds) to a launch stuck
// behind a slow systemd (seconds).
var launchBuckets = []float64{
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

var (
	resourceLabels     = []string{"resource", "unit"}
	admissionReadyDesc = prometheus.NewDesc("marshal_admission_ready",
		"1 while the admission authority can decide, else 0.", nil, nil)
	admissionCapacityDesc = prometheus.NewDesc("marshal_admission_capacity",
		"The host's work capacity the authority may reserve, per resource (cpu in cores, memory in bytes, tasks).",
		resourceLabels, nil)
	admissionTargetDesc = prometheus.NewDesc("marshal_admission_target",
		"The capacity scaled by pressure: what may be committed now, per resource.",
		resourceLabels, nil)
	admissionCommittedDesc = prometheus.NewDesc("marshal_admission_committed",
		"What charged attempts hold, per resource.",
		resourceLabels, nil)
	admissionFreeDesc = prometheus.NewDesc("marshal_admission_free",
		"What is left of the target for new attempts, per resource.",
		resourceLabels, nil)
	admissionChargedDesc = prometheus.NewDesc("marshal_admission_charged_attempts",
		"Attempts charged against capacity: prepared through suspect.", nil, nil)
)

// admissionCollector exports the authority's snapshot.
type admissionCollector struct{ src AdmissionSource }

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- admissionReadyDesc
	ch <- admissionCapacityDesc
	ch <- admissionTargetDesc
	ch <- admissionCommittedDesc
	ch <- admissionFreeDesc
	ch <- admissionChargedDesc
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.AdmissionState()
	ch <- prometheus.MustNewConstMetric(admissionReadyDesc, prometheus.GaugeValue, boolValue(st.Ready))
	amounts(ch, admissionCapacityDesc, st.Capacity)
	amounts(ch, admissionTargetDesc, st.Target)
	amounts(ch, admissionCommittedDesc, st.Committed)
	amounts(ch, admissionFreeDesc, st.Free)
	ch <- prometheus.MustNewConstMetric(admissionChargedDesc, prometheus.GaugeValue, float64(st.Charged))
}

// amounts sends a in base units, labelled as kube-state-metrics labels
// node capacity.
func amounts(ch chan<- prometheus.Metric, d *prometheus.Desc, a Amounts) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(a.CPUMilli)/1000, "cpu", "core")
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(a.MemoryBytes), "memory", "byte")
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(a.Tasks), "tasks", "task")
}

// launchMetrics are the admissions and launches the launch path records.
type launchMetrics struct {
	admissions *prometheus.CounterVec
	launches   *prometheus.HistogramVec
}

func newLaunchMetrics() *launchMetrics {
	return &launchMetrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marshal_admissions_total",
			Help: "Admission requests answered, per result (prepared, or the reason of a denial).",
		}, []string{"result"}),
		launches: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marshal_launch_duration_seconds",
			Help:    "Time from a launch request to its answer, per result (started, or the refusal's code).",
			Buckets: launchBuckets,
		}, []string{"result"}),
	}
}

// ObserveAdmission counts one admission answer. result is an enumeration
// ("prepared", "resource_unavailable", "resource_policy_unsupported",
// "attempt_conflict", …), never free text: each value is a time series.
func (m *Metrics) ObserveAdmission(result string) {
	m.launch.admissions.WithLabelValues(result).Inc()
}

// ObserveLaunch records one launch request that took d. result is
// "started" or the refusal's code in lower case ("workspace_busy", …),
// never free text.
func (m *Metrics) ObserveLaunch(result string, d time.Duration) {
	m.launch.launches.WithLabelValues(result).Observe(d.Seconds())
}
