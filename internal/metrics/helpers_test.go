package metrics

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// server serves m on a loopback port until the test ends and returns the
// URL of its /metrics.
func server(t *testing.T, m *Metrics) string {
	t.Helper()
	ln, err := ListenTCP(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v, want nil", err)
		}
	})
	return "http://" + ln.Addr().String() + "/metrics"
}

// scrape is one scrape, parsed by the Prometheus text parser.
type scrape map[string]*dto.MetricFamily

// get scrapes url as Prometheus does and parses the answer.
func get(t *testing.T, url string) scrape {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape of %s: %v", url, err)
	}
	return fams
}

// find returns the sample of family name whose labels include the
// name=value pairs given, or nil.
func (s scrape) find(name string, labels ...string) *dto.Metric {
	f, ok := s[name]
	if !ok {
		return nil
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, labels) {
			return m
		}
	}
	return nil
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == pairs[i] && l.GetValue() == pairs[i+1]
		}) {
			return false
		}
	}
	return true
}

// value returns the value of a counter or gauge sample, or a histogram's
// sample count, and fails t when the sample is absent.
func (s scrape) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := s.find(name, labels...)
	if m == nil {
		t.Fatalf("no sample %s%s in the scrape", name, labelString(labels))
	}
	switch s[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("%s has type %v", name, s[name].GetType())
	return 0
}

// typeOf fails t unless family name has type want.
func (s scrape) typeOf(t *testing.T, name string, want dto.MetricType) {
	t.Helper()
	f, ok := s[name]
	switch {
	case !ok:
		t.Errorf("no family %s in the scrape", name)
	case f.GetType() != want:
		t.Errorf("%s has type %v, want %v", name, f.GetType(), want)
	}
}

func labelString(pairs []string) string {
	if len(pairs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", pairs[i], pairs[i+1])
	}
	b.WriteByte('}')
	return b.String()
}
