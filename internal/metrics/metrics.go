package metrics

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/marshal-dev/marshal/internal/version"
)

// Options say what New exports. Every field is optional: what is not set
// is not exported.
type Options struct {
	// Controllers are exported per name; names must be unique.
	Controllers []Controller
	// Workqueue is the provider the controllers' queues were given.
	Workqueue *Workqueue
	// Agents gives marshal_agents_live.
	Agents AgentLister
	// Declared gives marshal_declared_objects, and a 0 in
	// marshal_agents_live for declared profiles without agents.
	Declared DeclaredKeys
	// Config gives the config dir's files, load errors and hold.
	Config ConfigSource
	// Admission gives the admission authority's gauges.
	Admission AdmissionSource
	// Logger receives errors of a scrape. Default: discarded.
	Logger *slog.Logger
}

// Metrics is marshald's registry: the collectors Options name, the
// admission and launch recorders, the build info, and the Go runtime and
// process collectors. It is never the process-wide default registry.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	launch  *launchMetrics
	egress  *egressMetrics
	control *prometheus.CounterVec
}

// New returns the metrics of what opts name. It returns ErrInvalidOptions
// when a controller is nil or two share a name.
func New(opts Options) (*Metrics, error) {
	seen := make(map[string]bool, len(opts.Controllers))
	for i, c := range opts.Controllers {
		if c == nil {
			return nil, fmt.Errorf("controller %d is nil: %w", i, ErrInvalidOptions)
		}
		if seen[c.Name()] {
			return nil, fmt.Errorf("two controllers are named %q: %w", c.Name(), ErrInvalidOptions)
		}
		seen[c.Name()] = true
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	m := &Metrics{reg: prometheus.NewRegistry(), launch: newLaunchMetrics(), egress: newEgressMetrics(), control: newControlRequests()}
	v := version.Get()
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "marshal_build_info",
			Help:        "Always 1; the labels say which build of marshald runs.",
			ConstLabels: prometheus.Labels{"version": v.Version, "commit": v.Commit, "goversion": v.GoVersion},
		}, func() float64 { return 1 }),
		newControllerCollector(opts.Controllers),
		m.launch.admissions,
		m.launch.launches,
		m.control,
	}
	cs = append(cs, m.egress.collectors()...)
	if opts.Workqueue != nil {
		cs = append(cs, opts.Workqueue)
	}
	if opts.Agents != nil {
		cs = append(cs, &agentsCollector{agents: opts.Agents, declared: opts.Declared})
	}
	if opts.Declared != nil {
		cs = append(cs, &declaredCollector{declared: opts.Declared})
	}
	if opts.Config != nil {
		cs = append(cs, &configCollector{src: opts.Config})
	}
	if opts.Admission != nil {
		cs = append(cs, &admissionCollector{src: opts.Admission})
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}

	// A collector that fails leaves its metrics out of the scrape and is
	// logged; the rest are served.
	m.handler = promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: maxScrapesInFlight,
	}))
	return m, nil
}

// maxScrapesInFlight bounds concurrent scrapes; more are answered 503.
const maxScrapesInFlight = 4

// Handler serves the metrics in the Prometheus text or OpenMetrics
// format, as the scraper asks.
func (m *Metrics) Handler() http.Handler { return m.handler }
