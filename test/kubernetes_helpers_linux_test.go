package test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/marshal-dev/marshal/internal/fleet"
	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/testutil/kubetest"
)

// kubeAPI returns the API server the tests share, with dist/kubernetes
// installed as kubectl apply -k installs it (marshal's CRDs, the hosts'
// role and admission policy), or skips the test when kube-apiserver or
// etcd is missing (fails in CI).
func kubeAPI(t testing.TB) (*kubetest.Server, dynamic.Interface) {
	t.Helper()
	files, err := kubetest.Kustomization("../dist/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	return kubetest.Shared(t, files...)
}

// hostClient returns a client with host's credential: a client
// certificate of user marshal:host:<host> in group marshal:hosts.
func hostClient(t testing.TB, server *kubetest.Server, host string) dynamic.Interface {
	t.Helper()
	client, err := server.UserClient(fleet.HostUser(host), fleet.HostsGroup)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

var (
	profilesGVR = schema.GroupVersionResource{Group: "marshal.dev", Version: "v1alpha1", Resource: "profiles"}
	hostsGVR    = schema.GroupVersionResource{Group: "marshal.dev", Version: "v1alpha1", Resource: "hosts"}
	leasesGVR   = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	eventsGVR   = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
)

// startKube runs d with --source kubernetes as the host name, with its
// credential. The Host it registers is deleted after the test, once the
// daemon has stopped.
func (d *daemon) startKube(server *kubetest.Server, name string, extra ...string) {
	d.t.Helper()
	admin, err := server.AdminClient()
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { deleteObject(d.t, admin, hostsGVR, name) })
	d.start(d.kubeArgs(server, fleet.HostUser(name), name, extra...)...)
}

// kubeArgs are the arguments of marshald --source kubernetes as the host
// name, with a credential of user in group marshal:hosts.
func (d *daemon) kubeArgs(server *kubetest.Server, user, name string, extra ...string) []string {
	d.t.Helper()
	kc := filepath.Join(filepath.Dir(d.state), "kubeconfig")
	if err := server.Kubeconfig(kc, user, fleet.HostsGroup); err != nil {
		d.t.Fatal(err)
	}
	return append([]string{
		"--source", "kubernetes", "--kubeconfig", kc, "--host-name", name,
		"--status-interval", "100ms", "--lease-duration", "4s",
	}, extra...)
}

// applyObject applies a marshal object, written as YAML, as the admin.
func applyObject(t testing.TB, client dynamic.Interface, doc string) {
	t.Helper()
	objs, err := kubetest.Decode(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if err := kubetest.Apply(t.Context(), client, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteObject deletes a cluster-scoped object, if it is there.
func deleteObject(t testing.TB, client dynamic.Interface, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	client.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{})
}

// waitAPI waits until the object name of gvr (in namespace ns, "" for a
// cluster-scoped one) exists and cond holds for it, watching it. within
// bounds the wait.
func waitAPI(t testing.TB, client dynamic.Interface, gvr schema.GroupVersionResource, ns, name, what string, within time.Duration, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	last, err := kubetest.Wait(ctx, client, gvr, ns, name, cond)
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s %s: %s; last seen: %v", within, gvr.Resource, name, what, last)
	}
	return last
}

// apiDeadline bounds a wait on the API server, which answers the first
// time more slowly than marshald does.
const apiDeadline = 3 * testutil.Deadline

func kubeProfile(name, pool string, cpu int) string {
	return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata:
  name: %s
  labels: {marshal.dev/pool: %s}
spec:
  limits:
    cpu_milli: %d
    tasks: 256
`, name, pool, cpu)
}

func kubeHost(name string, cpu int) string {
	return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Host
metadata:
  name: %s
spec:
  capacity: {cpu_milli: %d, memory_bytes: 4294967296, tasks: 2048}
`, name, cpu)
}

// latest returns the latest version of object name, nil when not seen.
func (w *watch) latest(name string) map[string]any {
	w.mu.Lock()
	raw := w.objects[name]
	w.mu.Unlock()
	var o map[string]any
	if raw != nil {
		json.Unmarshal(raw, &o)
	}
	return o
}

// kernelCPUMilli reads the CPU limit of profile's slice from the kernel's
// own files, in thousandths of a core: cpu.max where cgroup v2 holds the
// cpu controller, cpu.cfs_quota_us over cpu.cfs_period_us where v1 does.
// It fails the test when no hierarchy has the slice with a limit.
func kernelCPUMilli(t testing.TB, tree *testutil.CgroupTree, profile string) int64 {
	t.Helper()
	for _, root := range tree.Roots() {
		dir := filepath.Join(root, "marshal", "marshal.slice", scope.SliceName(profile))
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
			var quota, period int64
			if _, err := fmt.Sscanf(string(b), "%d %d", &quota, &period); err == nil && period > 0 {
				return quota * 1000 / period
			}
		}
		q, qerr := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
		p, perr := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
		if qerr != nil || perr != nil {
			continue
		}
		quota, qerr := strconv.ParseInt(strings.TrimSpace(string(q)), 10, 64)
		period, perr := strconv.ParseInt(strings.TrimSpace(string(p)), 10, 64)
		if qerr == nil && perr == nil && quota > 0 && period > 0 {
			return quota * 1000 / period
		}
	}
	t.Fatalf("no hierarchy holds a CPU limit of %s's slice (under %v)", profile, tree.Roots())
	return 0
}

// waitEvents watches the Events of marshal's objects until done holds for
// the latest Event match picks from each reporting instance, and returns
// those.
func waitEvents(t testing.TB, client dynamic.Interface, what string, match func(*unstructured.Unstructured) bool, done func(map[string]*unstructured.Unstructured) bool) map[string]*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), apiDeadline)
	defer cancel()
	ri := client.Resource(eventsGVR).Namespace("default")
	seen := map[string]*unstructured.Unstructured{}
	take := func(e *unstructured.Unstructured) {
		if match(e) {
			inst, _, _ := unstructured.NestedString(e.Object, "reportingInstance")
			seen[inst] = e
		}
	}
	for ctx.Err() == nil {
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range list.Items {
			take(&list.Items[i])
		}
		if done(seen) {
			return seen
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			if e, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != "DELETED" {
				take(e)
			}
			if done(seen) {
				w.Stop()
				return seen
			}
		}
		w.Stop()
	}
	t.Fatalf("timed out after %v waiting for %s; seen from: %v", apiDeadline, what, slices.Sorted(maps.Keys(seen)))
	return nil
}
