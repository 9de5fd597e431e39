package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/reconcile"
)

// BenchmarkScrape measures one scrape of marshald's metrics (four
// controllers and their queues, a declared profile per ten agents) as
// the number of agents grows: the agents collector copies every agent's
// status out of the store at each scrape.
func BenchmarkScrape(b *testing.B) {
	for _, agents := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			wq := NewWorkqueue()
			var ctrls []Controller
			for _, name := range []string{"profile", "workspace", "agent", "host"} {
				c, err := reconcile.NewController(name, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					return reconcile.Result{}, nil
				}), reconcile.Options{MetricsProvider: wq})
				if err != nil {
					b.Fatal(err)
				}
				ctrls = append(ctrls, c)
				wq.NewDepthMetric(name)
			}
			desired := reconcile.NewDesiredStore()
			store := reconcile.NewStore(reconcile.StoreOptions[v1alpha1.AgentStatus]{})
			for i := range agents {
				profile := fmt.Sprintf("p%d", i/10)
				if i%10 == 0 {
					obj := v1alpha1.New(v1alpha1.KindProfile)
					obj.GetObjectMeta().Name = profile
					if _, err := desired.Set(obj); err != nil {
						b.Fatal(err)
					}
				}
				id := fmt.Sprintf("%032x", i)
				store.Set(reconcile.Key{Kind: v1alpha1.KindAgent, Name: "marshal-" + profile + "-" + id + ".scope"},
					v1alpha1.AgentStatus{Profile: profile, ID: id, Populated: i%3 != 0,
						Path: "/marshal.slice/marshal-" + profile + ".slice/marshal-" + profile + "-" + id + ".scope"})
			}
			m, err := New(Options{Controllers: ctrls, Workqueue: wq, Agents: store, Declared: desired,
				Config: ConfigSourceFunc(func() ConfigState { return ConfigState{Files: agents / 10} })})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler()
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			var size int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("scrape: %d %s", rec.Code, rec.Body)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
