package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/testutil/kubetest"
	"github.com/marshal-dev/marshal/reconcile"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// realAPI returns the shared real API server with dist/kubernetes
// installed, as kubectl apply -k installs it.
func realAPI(t *testing.T) (*kubetest.Server, dynamic.Interface) {
	t.Helper()
	files, err := kubetest.Kustomization("../../dist/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	return kubetest.Shared(t, files...)
}

// hostClient returns a client with host's credential: user
// marshal:host:<host> in group marshal:hosts.
func hostClient(t *testing.T, server *kubetest.Server, host string) dynamic.Interface {
	t.Helper()
	client, err := server.UserClient(HostUser(host), HostsGroup)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// run starts s until the test ends, and waits until it is synced.
func run(t *testing.T, s *Source) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	testutil.Eventually(t, s.Synced(), func() bool {
		select {
		case <-s.Synced():
			return true
		default:
			return false
		}
	}, "synced")
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func createProfile(t *testing.T, client dynamic.Interface, name, pool string) {
	t.Helper()
	objs, err := kubetest.Decode(strings.NewReader(fmt.Sprintf(
		"apiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: %s, labels: {pool: %s}}\nspec: {}\n", name, pool)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Apply(t.Context(), client, objs[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Resource(profilesResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// Deleted while marshald was stopped: the list the restart finds is
// empty where the last run left objects, and it is held until confirmed.
func TestAnEmptyListAfterARestartIsHeld(t *testing.T) {
	_, client := realAPI(t)
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sel := "pool=" + strings.ToLower(t.Name())
	createProfile(t, client, "held-a", strings.ToLower(t.Name()))
	createProfile(t, client, "held-b", strings.ToLower(t.Name()))
	opts := func(sk *sink, ev *events) Options {
		return Options{Client: client, HostName: "h", Selector: mustSelector(t, sel), Sink: sk, Recorder: ev, Store: db}
	}
	first := newSink()
	stop := run(t, New(opts(first, &events{})))
	if got := fmt.Sprint(first.names()); got != "[Profile/held-a Profile/held-b]" {
		t.Fatalf("first run declared %s", got)
	}
	stop()

	for _, name := range []string{"held-a", "held-b"} {
		if err := client.Resource(profilesResource).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second, ev := newSink(), &events{}
	s := New(opts(second, ev))
	run(t, s)
	if got := fmt.Sprint(second.names()); got != "[Profile/held-a Profile/held-b]" {
		t.Fatalf("after the restart: %s, want both held", got)
	}
	if st := s.Status(); !st.Held || st.HeldObjects != 2 || !slices.Contains(ev.reasons, "EmptiedHeld") {
		t.Errorf("status %+v, events %q: want 2 objects held", st, ev.reasons)
	}
	if released, err := s.ConfirmEmpty(t.Context()); !released || err != nil {
		t.Fatalf("ConfirmEmpty = %v, %v", released, err)
	}
	if got := second.names(); len(got) != 0 {
		t.Errorf("after confirming: %q", got)
	}
}

// The Host named after this host is its Host; another is not listed.
func TestOnlyTheHostNamedAfterThisHost(t *testing.T) {
	_, client := realAPI(t)
	for _, name := range []string{"this-host", "other-host"} {
		objs, _ := kubetest.Decode(strings.NewReader("apiVersion: marshal.dev/v1alpha1\nkind: Host\nmetadata: {name: " + name + "}\nspec: {}\n"))
		if err := kubetest.Apply(t.Context(), client, objs[0]); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Resource(hostsResource).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	sk := newSink()
	s := New(Options{Client: client, HostName: "this-host", Selector: mustSelector(t, "pool=none"), Sink: sk})
	run(t, s)
	if got := fmt.Sprint(sk.names()); got != "[Host/this-host]" {
		t.Errorf("declared %s, want only Host/this-host", got)
	}
	if uid, ok := s.UID(reconcileKey("Host", "this-host")); !ok || uid == "" {
		t.Error("no uid for this host's Host")
	}
}

var profilesResource = schema.GroupVersionResource{Group: v1alpha1.Group, Version: v1alpha1.Version, Resource: "profiles"}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func reconcileKey(kind, name string) reconcile.Key { return reconcile.Key{Kind: kind, Name: name} }
