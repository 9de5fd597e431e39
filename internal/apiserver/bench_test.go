package apiserver_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/marshal-dev/marshal/internal/apiserver"
	"github.com/marshal-dev/marshal/internal/apiserver/apiservertest"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

func daemonWith(n int) *apiservertest.Daemon {
	d := apiservertest.NewDaemon()
	for i := range n {
		d.Set(profile(fmt.Sprintf("p-%05d", i), 1000))
	}
	return d
}

// BenchmarkList lists every profile over the socket: request, encoding of
// each object, decoding of the list.
func BenchmarkList(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			c := client.New(apiservertest.Serve(b, daemonWith(n), apiserver.Options{}))
			for b.Loop() {
				items, err := c.List(b.Context(), "profiles")
				if err != nil || len(items) != n {
					b.Fatalf("List = %d items, %v", len(items), err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// BenchmarkWatchChange measures one change to one object among n, from
// the daemon's signal to the MODIFIED line a watcher reads: the server
// lists and compares the whole kind at each change.
func BenchmarkWatchChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			d := daemonWith(n)
			c := client.New(apiservertest.Serve(b, d, apiserver.Options{}))
			events := make(chan localapi.WatchEvent, n+1)
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() {
				done <- c.Watch(ctx, "profiles", func(ev localapi.WatchEvent) error {
					events <- ev
					return nil
				})
			}()
			for range n {
				<-events
			}
			cpu := int64(1000)
			for b.Loop() {
				cpu++
				d.Set(profile("p-00000", cpu))
				if ev := <-events; ev.Type != localapi.Modified {
					b.Fatalf("event %s, want MODIFIED", ev.Type)
				}
			}
			cancel()
			<-done
		})
	}
}
