package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// AgentLister lists the agents' statuses: controllers.Stores.Agents
// (a *reconcile.Store[v1alpha1.AgentStatus]) satisfies it.
type AgentLister interface {
	List() []reconcile.Entry[v1alpha1.AgentStatus]
}

// DeclaredKeys lists the declared objects of a kind:
// controllers.Stores.Desired (a *reconcile.DesiredStore) satisfies it.
type DeclaredKeys interface {
	Keys(kind string) []reconcile.Key
}

var (
	_ AgentLister  = (*reconcile.Store[v1alpha1.AgentStatus])(nil)
	_ DeclaredKeys = (*reconcile.DesiredStore)(nil)
)

// ConfigState is what the manifest source reports of the config dir.
type ConfigState struct {
	// Files is how many manifest files the dir holds.
	Files int
	// Errors is how many load errors those files have now.
	Errors int
	// Held is set while an emptied dir is held: nothing was deleted.
	Held bool
}

// ConfigSource reports the config dir's state when metrics are scraped.
type ConfigSource interface {
	ConfigState() ConfigState
}

// ConfigSourceFunc adapts a function to ConfigSource.
type ConfigSourceFunc func() ConfigState

// ConfigState calls f.
func (f ConfigSourceFunc) ConfigState() ConfigState { return f() }

var (
	agentsLiveDesc = prometheus.NewDesc("marshal_agents_live",
		"Live agents (populated scopes) per profile; a declared profile without any is 0.",
		[]string{"profile"}, nil)
	declaredObjectsDesc = prometheus.NewDesc("marshal_declared_objects",
		"Objects the config dir declares, per kind.",
		[]string{"kind"}, nil)
	configFilesDesc = prometheus.NewDesc("marshal_config_files",
		"Manifest files in the config dir.", nil, nil)
	configErrorsDesc = prometheus.NewDesc("marshal_config_load_errors",
		"Load errors of the config dir's manifest files now; their objects keep their last good version.", nil, nil)
	configHeldDesc = prometheus.NewDesc("marshal_config_held",
		"1 while an emptied or missing config dir is held and nothing was deleted, else 0.", nil, nil)
)

// agentsCollector exports marshal_agents_live.
type agentsCollector struct {
	agents   AgentLister
	declared DeclaredKeys // nil: only profiles with scopes are exported
}

func (c *agentsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- agentsLiveDesc }

func (c *agentsCollector) Collect(ch chan<- prometheus.Metric) {
	live := map[string]int{}
	if c.declared != nil {
		for _, k := range c.declared.Keys(v1alpha1.KindProfile) {
			live[k.Name] = 0
		}
	}
	for _, e := range c.agents.List() {
		n := live[e.Value.Profile]
		if e.Value.Populated {
			n++
		}
		// A scope of an undeclared profile (orphaned) is exported too.
		live[e.Value.Profile] = n
	}
	for profile, n := range live {
		ch <- prometheus.MustNewConstMetric(agentsLiveDesc, prometheus.GaugeValue, float64(n), profile)
	}
}

// declaredCollector exports marshal_declared_objects.
type declaredCollector struct{ declared DeclaredKeys }

func (c *declaredCollector) Describe(ch chan<- *prometheus.Desc) { ch <- declaredObjectsDesc }

func (c *declaredCollector) Collect(ch chan<- prometheus.Metric) {
	for _, kind := range v1alpha1.Kinds {
		ch <- prometheus.MustNewConstMetric(declaredObjectsDesc, prometheus.GaugeValue, float64(len(c.declared.Keys(kind))), kind)
	}
}

// configCollector exports the config dir's state.
type configCollector struct{ src ConfigSource }

func (c *configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- configFilesDesc
	ch <- configErrorsDesc
	ch <- configHeldDesc
}

func (c *configCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.ConfigState()
	ch <- prometheus.MustNewConstMetric(configFilesDesc, prometheus.GaugeValue, float64(st.Files))
	ch <- prometheus.MustNewConstMetric(configErrorsDesc, prometheus.GaugeValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(configHeldDesc, prometheus.GaugeValue, boolValue(st.Held))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
