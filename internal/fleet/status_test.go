package fleet

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/marshal-dev/marshal/internal/testutil/kubetest"
)

// startStatus runs h until the test ends, or until the returned stop.
func startStatus(t *testing.T, h *HostStatus) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// A host whose Host the API does not hold registers it, with an empty
// spec, with its own credential, and writes its status there.
func TestHostStatusRegistersItsHost(t *testing.T) {
	server, admin := realAPI(t)
	const host = "reg-unit"
	admin.Resource(hostsResource).Delete(t.Context(), host, metav1.DeleteOptions{})
	t.Cleanup(func() { admin.Resource(hostsResource).Delete(context.Background(), host, metav1.DeleteOptions{}) })
	startStatus(t, NewHostStatus(HostStatusOptions{
		Client: hostClient(t, server, host), HostName: host, Register: true,
		Status: func() v1alpha1.HostStatus { return v1alpha1.HostStatus{Agents: 2} },
	}))
	ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
	defer cancel()
	u, err := kubetest.Wait(ctx, admin, hostsResource, "", host, func(u *unstructured.Unstructured) bool {
		agents, _, _ := unstructured.NestedInt64(u.Object, "status", "agents")
		return agents == 2
	})
	if err != nil {
		t.Fatalf("the registered Host with its status: %v; last seen %v", err, u)
	}
	if spec, _, _ := unstructured.NestedMap(u.Object, "spec"); len(spec) != 0 {
		t.Errorf("the registered Host's spec = %v, want it empty", spec)
	}
}

// A Host the admission policy does not let this credential create is not
// created: the host waits for one to be declared, says so once, and
// tries again only when its status changes.
func TestHostStatusRegistrationRefused(t *testing.T) {
	server, admin := realAPI(t)
	const host = "reg-refused"
	admin.Resource(hostsResource).Delete(t.Context(), host, metav1.DeleteOptions{})
	var log bytes.Buffer
	asked := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := NewHostStatus(HostStatusOptions{
		// Another host's credential: the policy refuses it this Host.
		Client: hostClient(t, server, "reg-other"), HostName: host, Register: true, Interval: time.Millisecond,
		Status: func() v1alpha1.HostStatus {
			select {
			case asked <- struct{}{}:
			case <-ctx.Done():
			}
			return v1alpha1.HostStatus{Agents: 1}
		},
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	stop := startStatus(t, h)
	// The status is asked for before each write: asked a second time, the
	// first write, and its registration, are done.
	for i := range 2 {
		select {
		case <-asked:
		case <-time.After(testutil.Deadline):
			t.Fatalf("the status was asked for %d times, want 2", i)
		}
		h.Changed()
	}
	cancel()
	stop()
	if _, err := admin.Resource(hostsResource).Get(t.Context(), host, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Host another host's credential registered: %v, want none", err)
	}
	if got := log.String(); strings.Count(got, "no Host object is named after this host") != 1 ||
		!strings.Contains(got, "creating it was refused") || !strings.Contains(got, "host-register") {
		t.Errorf("the log says, want the refusal once, with the policy's rule:\n%s", got)
	}
}
