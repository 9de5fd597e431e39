package metrics

import "github.com/prometheus/client_golang/prometheus"

// newControlRequests counts the control plane's judgements of requests
// that did not come from the user.
func newControlRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marshal_control_requests_total",
		Help: "Requests from inside agents (caller agent) or from processes that count as the most restricted agent (caller unattributed), " +
			"per surface (api, devguard), action (read, run, apply, delete, stop, admin, consumer) and verdict (allowed, refused).",
	}, []string{"surface", "caller", "action", "verdict"})
}

// Verdicts of ObserveControl.
const (
	ControlAllowed = "allowed"
	ControlRefused = "refused"
)

// ObserveControl counts one request judged by the control plane. Every
// label is an enumeration: surface api or devguard, caller agent or
// unattributed, action one of package control's, verdict ControlAllowed
// or ControlRefused.
func (m *Metrics) ObserveControl(surface, caller, action, verdict string) {
	m.control.WithLabelValues(surface, caller, action, verdict).Inc()
}
