package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// egressBuckets are the bounds, in seconds, of the egress decision
// histogram: from a decision on an IP address (microseconds) to one that
// waited on a slow resolver (seconds).
var egressBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 5e-3, 25e-3, 0.1, 0.5, 2.5, 10,
}

// egressMetrics are what the egress proxy records.
type egressMetrics struct {
	connections *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	decision    prometheus.Histogram
}

func newEgressMetrics() *egressMetrics {
	return &egressMetrics{
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marshal_egress_connections_total",
			Help: "Connections (plain HTTP: requests) the egress proxy decided, per profile (empty for a peer in no launch) and verdict (allow, deny, error).",
		}, []string{"profile", "verdict"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marshal_egress_bytes_total",
			Help: "Bytes the egress proxy carried, per profile and direction (out: to the destination, in: from it).",
		}, []string{"profile", "direction"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "marshal_egress_decision_seconds",
			Help:    "Time to decide a request: the policy, the name's resolution and the rules, before any dial.",
			Buckets: egressBuckets,
		}),
	}
}

func (e *egressMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.connections, e.bytes, e.decision}
}

// ObserveEgress counts one decision of the egress proxy that took d.
// profile is the peer's profile, "" for a peer in no launch; verdict is
// allow, deny or error. Both are bounded: profile names come from
// launches marshald made.
func (m *Metrics) ObserveEgress(profile, verdict string, d time.Duration) {
	m.egress.connections.WithLabelValues(profile, verdict).Inc()
	m.egress.decision.Observe(d.Seconds())
}

// AddEgressBytes counts bytes the egress proxy carried for profile.
func (m *Metrics) AddEgressBytes(profile string, out, in int64) {
	if out > 0 {
		m.egress.bytes.WithLabelValues(profile, "out").Add(float64(out))
	}
	if in > 0 {
		m.egress.bytes.WithLabelValues(profile, "in").Add(float64(in))
	}
}
