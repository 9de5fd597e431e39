package test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/testutil/kubetest"
)

// kubeAPI returns the API server the tests share, with marshal's CRDs
// and dist/kubernetes installed, or skips the test when kube-apiserver
// or etcd is missing (fails in CI).
func kubeAPI(t testing.TB) (*kubetest.Server, dynamic.Interface) {
	t.Helper()
	files, _ := filepath.Glob("../dist/kubernetes/crds/*.yaml")
	return kubetest.Shared(t, append(files, "../dist/kubernetes/namespace.yaml", "../dist/kubernetes/rbac.yaml")...)
}

var (
	profilesGVR = schema.GroupVersionResource{Group: "marshal.dev", Version: "v1alpha1", Resource: "profiles"}
	hostsGVR    = schema.GroupVersionResource{Group: "marshal.dev", Version: "v1alpha1", Resource: "hosts"}
	leasesGVR   = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	eventsGVR   = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
)

// startKube runs d with --source kubernetes as host user i of server,
// the Host named name.
func (d *daemon) startKube(server *kubetest.Server, i int, name string, extra ...string) {
	d.t.Helper()
	kc := filepath.Join(filepath.Dir(d.state), "kubeconfig")
	if err := server.Kubeconfig(kc, i); err != nil {
		d.t.Fatal(err)
	}
	d.start(append([]string{
		"--source", "kubernetes", "--kubeconfig", kc, "--host-name", name,
		"--status-interval", "100ms", "--lease-duration", "4s",
	}, extra...)...)
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
	ri := client.Resource(gvr).Namespace(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *unstructured.Unstructured
	for ctx.Err() == nil {
		list, err := ri.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			continue
		}
		last = nil
		if len(list.Items) > 0 {
			last = &list.Items[0]
		}
		if last != nil && cond(last) {
			return last
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			last = u
			if ev.Type == "DELETED" {
				last = nil
			}
			if last != nil && cond(last) {
				w.Stop()
				return last
			}
		}
		w.Stop()
	}
	t.Fatalf("timed out after %v waiting for %s %s: %s; last seen: %v", within, gvr.Resource, name, what, last)
	return nil
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
