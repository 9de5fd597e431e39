package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/testutil/kubetest"
)

// BenchmarkKubernetesCreateToSlice times a Profile created in the API
// server until its slice exists on the host, as inotify reports it: the
// create (the API server's write to etcd), the watch event, the strict
// load, the declaration, the reconcile and the cgroupfs backend's mkdir
// and limits. Creates follow each other as soon as the last slice
// appears. It reports the median and the 99th percentile in
// milliseconds; the target is a p99 of 50 ms.
func BenchmarkKubernetesCreateToSlice(b *testing.B) {
	if raceEnabled {
		b.Skip("times the daemon: run without -race")
	}
	server, client := kubeAPI(b)
	const pool = "bench-create"
	b.Cleanup(func() { deleteLabelled(client, profilesGVR, "marshal.dev/pool="+pool) })
	d := newDaemon(b)
	d.startKube(server, "host-4", "--selector", "marshal.dev/pool="+pool)
	slices := d.tree.V2("marshal", "marshal.slice")
	testutil.Eventually(b, d.log.wake, func() bool { _, err := os.Stat(slices); return err == nil }, "marshal.slice")
	w, err := fsnotify.NewWatcher()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(slices); err != nil {
		b.Fatal(err)
	}
	ri := client.Resource(profilesGVR)
	lat := make([]time.Duration, 0, 1024)
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("bench-%d", i)
		obj, _ := kubetest.Decode(strings.NewReader(kubeProfile(name, pool, 500)))
		want := filepath.Join(slices, scope.SliceName(name))
		start := time.Now()
		if _, err := ri.Create(context.Background(), obj[0], metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitCreated(b, w, want)
		lat = append(lat, time.Since(start))
	}
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func waitCreated(b *testing.B, w *fsnotify.Watcher, path string) {
	b.Helper()
	deadline := time.NewTimer(testutil.Deadline)
	defer deadline.Stop()
	for {
		select {
		case ev := <-w.Events:
			if ev.Name == path && ev.Has(fsnotify.Create) {
				return
			}
		case err := <-w.Errors:
			b.Fatal(err)
		case <-deadline.C:
			b.Fatalf("%s not created within %v", path, testutil.Deadline)
		}
	}
}

// BenchmarkKubernetesStartup1000 is the cost of 1,000 objects (a Profile
// and 999 Workspaces) in the API server at marshald's start: the time
// from the start to ready (all listed and declared) and until every
// object is reconciled, and the CPU time marshald spent until then.
func BenchmarkKubernetesStartup1000(b *testing.B) {
	if raceEnabled {
		b.Skip("times the daemon: run without -race")
	}
	server, client := kubeAPI(b)
	const pool = "bench-startup"
	b.Cleanup(func() {
		deleteLabelled(client, profilesGVR, "marshal.dev/pool="+pool)
		deleteLabelled(client, workspacesGVR, "marshal.dev/pool="+pool)
	})
	root := b.TempDir()
	docs := []string{kubeProfile("bench-coder", pool, 1000)}
	for i := range 999 {
		docs = append(docs, fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Workspace
metadata: {name: ws-%04d, labels: {marshal.dev/pool: %s}}
spec: {root: %s, profile: bench-coder}
`, i, pool, root))
	}
	createAll(b, client, docs)

	var ready, reconciled, cpu []time.Duration
	for b.Loop() {
		d := newDaemon(b)
		start := time.Now()
		d.startKube(server, "host-4", "--selector", "marshal.dev/pool="+pool)
		ready = append(ready, time.Since(start))
		w := d.watch("workspaces")
		testutil.Eventually(b, w.wake, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.observed) < 999 {
				return false
			}
			for _, g := range w.observed {
				if g != 1 {
					return false
				}
			}
			return true
		}, "every workspace reconciled")
		reconciled = append(reconciled, time.Since(start))
		cpu = append(cpu, cpuTime(b, d.cmd.Process.Pid))
		w.cancel()
		d.stop()
	}
	b.ReportMetric(ms(percentile(ready, 50)), "ready-ms")
	b.ReportMetric(ms(percentile(reconciled, 50)), "reconciled-ms")
	b.ReportMetric(ms(percentile(cpu, 50)), "cpu-ms")
	b.ReportMetric(0, "ns/op")
}

var workspacesGVR = schema.GroupVersionResource{Group: "marshal.dev", Version: "v1alpha1", Resource: "workspaces"}

// createAll creates the objects of docs, eight at a time.
func createAll(b *testing.B, client dynamic.Interface, docs []string) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(docs))
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for doc := range next {
				objs, err := kubetest.Decode(strings.NewReader(doc))
				if err == nil {
					err = kubetest.Apply(context.Background(), client, objs[0])
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for _, doc := range docs {
		next <- doc
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func deleteLabelled(client dynamic.Interface, gvr schema.GroupVersionResource, selector string) {
	client.Resource(gvr).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
}

// cpuTime is the user and system time pid has used, from /proc.
func cpuTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th fields of the line.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	// The kernel counts in clock ticks, 100 per second on Linux.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
