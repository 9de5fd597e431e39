package test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/marshal-dev/marshal/internal/fleet"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// The writes of a host, shaped as marshald's are: each as host's
// credential would make them, about the objects of another.
type hostWrites struct {
	client dynamic.Interface
	host   string
}

func (w hostWrites) createHost(ctx context.Context, name string, spec map[string]any) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "marshal.dev/v1alpha1", "kind": "Host",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	_, err := w.client.Resource(hostsGVR).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func (w hostWrites) applyStatus(ctx context.Context, name string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "marshal.dev/v1alpha1", "kind": "Host",
		"metadata": map[string]any{"name": name}, "status": map[string]any{"agents": int64(1)},
	}}
	_, err := w.client.Resource(hostsGVR).ApplyStatus(ctx, name, obj,
		metav1.ApplyOptions{FieldManager: fleet.FieldManager(w.host), Force: true})
	return err
}

func (w hostWrites) renewLease(ctx context.Context, name, holder string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": name, "namespace": "marshal-system"},
		"spec": map[string]any{
			"holderIdentity": holder, "leaseDurationSeconds": int64(40),
			"renewTime": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		},
	}}
	_, err := w.client.Resource(leasesGVR).Namespace("marshal-system").Apply(ctx, name, obj,
		metav1.ApplyOptions{FieldManager: fleet.FieldManager(w.host), Force: true})
	return err
}

func (w hostWrites) createEvent(ctx context.Context, name, instance string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata":            map[string]any{"name": name, "namespace": "default"},
		"eventTime":           time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		"reportingController": fleet.ReportingController, "reportingInstance": instance,
		"action": "Test", "reason": "Test", "type": "Normal",
		"regarding": map[string]any{"apiVersion": "marshal.dev/v1alpha1", "kind": "Host", "name": instance},
	}}
	_, err := w.client.Resource(eventsGVR).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func (w hostWrites) repeatEvent(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	_, err := w.client.Resource(eventsGVR).Namespace("default").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// accepted fails the test when err refused a host's write of its own.
func accepted(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want it accepted", what, err)
	}
}

// refusedBy fails the test unless err is the admission policy's refusal
// by rule.
func refusedBy(t *testing.T, what, rule string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "marshal-host-restriction") || !strings.Contains(err.Error(), "denied request: "+rule+": ") {
		t.Errorf("%s: %v, want it refused by the rule %s", what, err, rule)
	}
}

// With host a's credential, a writes what is its own (its Host, with an
// empty spec; its Host's status, its Lease, its Events) and none of host
// b's: each refusal names the rule of dist/kubernetes's admission policy
// that refuses it.
func TestKubernetesHostWritesOnlyItsOwn(t *testing.T) {
	server, admin := kubeAPI(t)
	const a, b = "own-a", "own-b"
	for _, h := range []string{a, b} {
		deleteObject(t, admin, hostsGVR, h)
		admin.Resource(leasesGVR).Namespace("marshal-system").Delete(t.Context(), h, metav1.DeleteOptions{})
		t.Cleanup(func() {
			deleteObject(t, admin, hostsGVR, h)
			admin.Resource(leasesGVR).Namespace("marshal-system").Delete(context.Background(), h, metav1.DeleteOptions{})
			for _, e := range []string{h + ".own", h + ".forged"} {
				admin.Resource(eventsGVR).Namespace("default").Delete(context.Background(), e, metav1.DeleteOptions{})
			}
		})
	}
	asA := hostWrites{hostClient(t, server, a), a}
	asB := hostWrites{hostClient(t, server, b), b}

	t.Run("host", func(t *testing.T) {
		refusedBy(t, "a creates b's Host", "host-register", asA.createHost(t.Context(), b, map[string]any{}))
		if _, err := admin.Resource(hostsGVR).Get(t.Context(), b, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("b's Host after a's refused creation: %v, want none", err)
		}
		refusedBy(t, "a creates its Host with a spec", "host-register",
			asA.createHost(t.Context(), a, map[string]any{"capacity": map[string]any{"cpu_milli": int64(64000)}}))
		accepted(t, "a creates its Host", asA.createHost(t.Context(), a, map[string]any{}))
		accepted(t, "b creates its Host", asB.createHost(t.Context(), b, nil))
	})
	t.Run("status", func(t *testing.T) {
		refusedBy(t, "a writes b's Host's status", "own-host-status", asA.applyStatus(t.Context(), b))
		accepted(t, "a writes its Host's status", asA.applyStatus(t.Context(), a))
	})
	t.Run("lease", func(t *testing.T) {
		accepted(t, "b takes its Lease", asB.renewLease(t.Context(), b, b))
		refusedBy(t, "a renews b's Lease", "own-lease", asA.renewLease(t.Context(), b, a))
		refusedBy(t, "a creates a Lease of another name", "own-lease", asA.renewLease(t.Context(), "own-c", a))
		refusedBy(t, "a takes its Lease for b", "own-lease", asA.renewLease(t.Context(), a, b))
		accepted(t, "a takes its Lease", asA.renewLease(t.Context(), a, a))
		accepted(t, "a renews its Lease", asA.renewLease(t.Context(), a, a))
	})
	t.Run("events", func(t *testing.T) {
		accepted(t, "b writes its Event", asB.createEvent(t.Context(), b+".own", b))
		refusedBy(t, "a writes an Event reported by b", "own-events", asA.createEvent(t.Context(), b+".forged", b))
		refusedBy(t, "a repeats b's Event", "own-events", asA.repeatEvent(t.Context(), b+".own"))
		accepted(t, "a writes its Event", asA.createEvent(t.Context(), a+".own", a))
		accepted(t, "a repeats its Event", asA.repeatEvent(t.Context(), a+".own"))
	})
	t.Run("a_member_not_named_as_a_host", func(t *testing.T) {
		// The credentials of old: the host's bare name, in the group.
		client, err := server.UserClient(a, fleet.HostsGroup)
		if err != nil {
			t.Fatal(err)
		}
		bare := hostWrites{client, a}
		refusedBy(t, "a bare name writes the status of the Host of its name", "host-name", bare.applyStatus(t.Context(), a))
		refusedBy(t, "a bare name takes the Lease of its name", "host-name", bare.renewLease(t.Context(), a, a))
	})
}

// marshald whose credential names another host, or none, refuses to
// start, saying which name it found, and writes nothing to the API.
func TestKubernetesCredentialOfAnotherHostIsRefused(t *testing.T) {
	server, admin := kubeAPI(t)
	const host = "cred-b"
	tests := []struct {
		name, user, want string
	}{
		{name: "another_host", user: fleet.HostUser("cred-a"), want: `user "marshal:host:cred-a", which names host "cred-a", not "cred-b"`},
		{name: "no_host", user: "cred-b", want: `user "cred-b", which names no host`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDaemon(t)
			ctx, cancel := context.WithTimeout(t.Context(), testutil.Deadline)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(bin, "marshald"), d.args(d.kubeArgs(server, tc.user, host)...)...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || ctx.Err() != nil {
				t.Fatalf("marshald: %v, want it to refuse to start:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("marshald's refusal does not say %q:\n%s", tc.want, out)
			}
			if _, err := admin.Resource(leasesGVR).Namespace("marshal-system").Get(t.Context(), host, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Lease of %s: %v, want none", host, err)
			}
			if _, err := admin.Resource(hostsGVR).Get(t.Context(), host, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Host %s: %v, want none", host, err)
			}
		})
	}
}

// statusCPU is the CPU capacity a Host's status reports.
func statusCPU(u *unstructured.Unstructured) int64 {
	cpu, _, _ := unstructured.NestedInt64(u.Object, "status", "capacity", "cpu_milli")
	return cpu
}

// marshald on a host no Host is declared for registers one, with an
// empty spec, and reports its measured capacity on it; a Host declared
// later (as Flux applies one from git) wins; a Host deleted while the
// host runs is registered again. With --register-host=false it waits
// for one to be declared.
func TestKubernetesHostRegistersItself(t *testing.T) {
	server, client := kubeAPI(t)
	const host = "reg-a"
	deleteObject(t, client, hostsGVR, host)
	d := newDaemon(t)
	d.startKube(server, host)
	o := waitAPI(t, client, hostsGVR, "", host, "registered, its measured capacity in its status", apiDeadline, func(u *unstructured.Unstructured) bool {
		backend, _, _ := unstructured.NestedString(u.Object, "status", "backend")
		return statusCPU(u) > 0 && backend == "cgroupfs"
	})
	if spec, _, _ := unstructured.NestedMap(o.Object, "spec"); len(spec) != 0 {
		t.Errorf("the registered Host's spec = %v, want it empty", spec)
	}
	measured := statusCPU(o)
	for _, mf := range o.GetManagedFields() {
		if mf.Manager != fleet.FieldManager(host) {
			t.Errorf("the registered Host has fields of %s", mf.Manager)
		}
	}

	t.Run("a_host_in_git_wins", func(t *testing.T) {
		declared := measured + 1000
		applyObject(t, client, kubeHost(host, int(declared)))
		waitAPI(t, client, hostsGVR, "", host, "the declared capacity in its status", apiDeadline, func(u *unstructured.Unstructured) bool {
			return statusCPU(u) == declared
		})
	})
	t.Run("deleted_is_registered_again", func(t *testing.T) {
		old, err := client.Resource(hostsGVR).Get(t.Context(), host, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deleteObject(t, client, hostsGVR, host)
		waitAPI(t, client, hostsGVR, "", host, "registered again, with its measured capacity", apiDeadline, func(u *unstructured.Unstructured) bool {
			return u.GetUID() != old.GetUID() && statusCPU(u) == measured
		})
	})
	t.Run("not_with_register_host_false", func(t *testing.T) {
		const other = "reg-b"
		deleteObject(t, client, hostsGVR, other)
		d := newDaemon(t)
		d.startKube(server, other, "--register-host=false")
		testutil.Eventually(t, d.log.wake, func() bool {
			return strings.Contains(d.log.String(), "no Host object is named after this host")
		}, "the status writer to find no Host")
		if _, err := client.Resource(hostsGVR).Get(t.Context(), other, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Host %s with --register-host=false: %v, want none", other, err)
		}
	})
}
