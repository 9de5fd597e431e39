//go:build linux

package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/identity"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/peer"
	"github.com/marshal-dev/marshal/reconcile"
)

// noLaunches is a record of no launch.
type noLaunches struct{}

func (noLaunches) Launch(string) (peer.Launch, bool) { return peer.Launch{}, false }
func (noLaunches) Launches() []peer.Launch           { return nil }

// BenchmarkControlAttribution times one API request (GET /v1/info) on a
// connection of its own, as each marshalctl command makes it, against
// two servers in the same run, taking turns: one that attributes every
// connection's peer (SO_PEERCRED, a pidfd, its network namespace, its
// /proc/<pid>/cgroup through the scope parser) and one that takes every
// peer for the user. It reports the p50 of each and their difference.
// Target: attribution adds at most 50 µs at p50.
func BenchmarkControlAttribution(b *testing.B) {
	host, err := identity.SelfNetNS()
	if err != nil {
		b.Fatal(err)
	}
	cp := &controlPlane{surface: surfaceAPI, launches: noLaunches{}, host: host, desired: reconcile.NewDesiredStore(), log: slog.New(slog.DiscardHandler)}
	with := apiservertest.Serve(b, apiservertest.NewDaemon(), apiserver.Options{Control: cp})
	without := apiservertest.Serve(b, apiservertest.NewDaemon(), apiserver.Options{})
	get := func(socket string) time.Duration {
		tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://marshald" + localapi.InfoPath)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s", localapi.InfoPath, resp.Status)
		}
		return time.Since(start)
	}
	var tw, tu []time.Duration
	for b.Loop() {
		tw = append(tw, get(with))
		tu = append(tu, get(without))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	w, u := p50(tw), p50(tu)
	b.ReportMetric(w, "p50-µs-attributed")
	b.ReportMetric(u, "p50-µs-unattributed")
	b.ReportMetric(w-u, "p50-µs-added")
}
