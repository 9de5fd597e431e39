package test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// appliedCPU is what a profile's status says is in force of its CPU
// limit, read back from its slice.
func appliedCPU(o map[string]any) float64 {
	limits, _ := field(o, "status", "limits").([]any)
	for _, l := range limits {
		if m, _ := l.(map[string]any); m["resource"] == "cpu" {
			v, _ := m["applied"].(float64)
			return v
		}
	}
	return 0
}

// A Profile created in the API, among those the selector picks, reaches
// this host: marshalctl shows it and its slice carries its limits; an
// edit in the API reaches the slice; one the selector does not pick,
// and one marshal's own validation refuses, change nothing here.
func TestKubernetesProfileReachesTheSlice(t *testing.T) {
	server, client := kubeAPI(t)
	for _, name := range []string{"fleet-coder", "fleet-other", "fleet-bad"} {
		deleteObject(t, client, profilesGVR, name)
		t.Cleanup(func() { deleteObject(t, client, profilesGVR, name) })
	}
	d := newDaemon(t)
	d.startKube(server, "host-1", "--selector", "marshal.dev/pool=ci")
	profiles := d.watch("profiles")

	applyObject(t, client, kubeProfile("fleet-coder", "ci", 500))
	applyObject(t, client, kubeProfile("fleet-other", "dev", 500))
	o := profiles.until(t, "fleet-coder", "ready with its limit in force", func(o map[string]any) bool {
		return conditionIs(o, "Ready", "True") && appliedCPU(o) == 500
	})
	if field(o, "metadata", "generation") != 1.0 {
		t.Errorf("generation = %v, want 1", field(o, "metadata", "generation"))
	}
	if _, err := os.Stat(d.tree.V2("marshal", "marshal.slice", scope.SliceName("fleet-coder"))); err != nil {
		t.Errorf("the profile's slice: %v", err)
	}
	if got := kernelCPUMilli(t, d.tree, "fleet-coder"); got != 500 {
		t.Errorf("the kernel limits fleet-coder's slice to %d millicores, want 500", got)
	}
	if out := d.mustCtl("get", "profiles"); !strings.Contains(out, "fleet-coder") || strings.Contains(out, "fleet-other") {
		t.Errorf("get profiles shows what the selector does not pick, or not what it does:\n%s", out)
	}

	// The table's first rows come from a list, before its watch begins: a
	// row printed after them is the watch's, so that the deletions below
	// are seen by a watch that is running.
	table := d.watchLines("get", "profiles", "-w")
	table.until(t, "the table", func(s string) bool { return strings.HasPrefix(s, "fleet-coder ") && strings.Contains(s, "cpu=500m") })

	t.Run("edit", func(t *testing.T) {
		applyObject(t, client, kubeProfile("fleet-coder", "ci", 800))
		profiles.until(t, "fleet-coder", "at generation 2 with the new limit in force", func(o map[string]any) bool {
			return generationIs(2)(o) && appliedCPU(o) == 800
		})
		table.until(t, "the edit in the table", func(s string) bool {
			return strings.HasPrefix(s, "fleet-coder ") && strings.Contains(s, "cpu=800m")
		})
		if got := kernelCPUMilli(t, d.tree, "fleet-coder"); got != 800 {
			t.Errorf("after the edit the kernel limits fleet-coder's slice to %d millicores, want 800", got)
		}
	})
	t.Run("stricter_than_the_schema", func(t *testing.T) {
		// The CRD's schema takes a range with bits set beyond its prefix;
		// marshal does not. Created first as good, then broken: the last
		// good version stays, Invalid says why.
		applyObject(t, client, kubeProfile("fleet-bad", "ci", 300))
		profiles.until(t, "fleet-bad", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
		applyObject(t, client, `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: fleet-bad, labels: {marshal.dev/pool: ci}}
spec:
  limits: {cpu_milli: 300}
  egress: {default: deny, rules: [{action: allow, cidrs: ["10.20.0.1/16"]}]}
`)
		o := profiles.until(t, "fleet-bad", "invalid", func(o map[string]any) bool { return conditionIs(o, "Invalid", "True") })
		msg, _ := condition(o, "Invalid")["message"].(string)
		if !strings.Contains(msg, "profile/fleet-bad") || !strings.Contains(msg, "spec.egress.rules[0].cidrs[0]") {
			t.Errorf("Invalid message = %q, want the object and the field", msg)
		}
		if field(o, "spec", "egress") != nil || !conditionIs(o, "Ready", "True") {
			t.Errorf("the refused version took effect: %v", o)
		}
	})
	t.Run("delete", func(t *testing.T) {
		deleteObject(t, client, profilesGVR, "fleet-bad")
		deleteObject(t, client, profilesGVR, "fleet-coder")
		table.until(t, "fleet-coder deleted", func(s string) bool {
			return strings.HasPrefix(s, "fleet-coder ") && strings.HasSuffix(s, "(deleted)")
		})
	})
}

// A Profile that marshal refuses is told on the Profile itself, in an
// Event whose regarding is its uid, as kubectl describe shows it: one
// that never loaded by an Invalid Event, one that loaded and then failed
// by the LoadFailed Event of its Invalid condition, its last good
// version kept.
func TestKubernetesRefusedProfileIsToldOnTheProfile(t *testing.T) {
	server, client := kubeAPI(t)
	for _, name := range []string{"fleet-never", "fleet-broken"} {
		deleteObject(t, client, profilesGVR, name)
		t.Cleanup(func() { deleteObject(t, client, profilesGVR, name) })
	}
	d := newDaemon(t)
	d.startKube(server, "host-4")
	profiles := d.watch("profiles")
	// The CRD's schema takes a range with bits set beyond its prefix;
	// marshal does not.
	refused := func(name string) string {
		return fmt.Sprintf(`apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: %s}
spec:
  limits: {cpu_milli: 300}
  egress: {default: deny, rules: [{action: allow, cidrs: ["10.20.0.1/16"]}]}
`, name)
	}
	uid := func(t *testing.T, name string) string {
		t.Helper()
		o, err := client.Resource(profilesGVR).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(o.GetUID())
	}
	// toldOn waits for this host's latest Event with reason about the
	// Profile of uid, and checks what it says.
	toldOn := func(t *testing.T, name, uid, reason string) {
		t.Helper()
		e := waitEvents(t, client, "a "+reason+" Event about Profile "+name, func(e *unstructured.Unstructured) bool {
			r, _, _ := unstructured.NestedString(e.Object, "reason")
			about, _, _ := unstructured.NestedString(e.Object, "regarding", "uid")
			return r == reason && about == uid
		}, func(seen map[string]*unstructured.Unstructured) bool { return seen["host-4"] != nil })["host-4"]
		kind, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
		about, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
		typ, _, _ := unstructured.NestedString(e.Object, "type")
		note, _, _ := unstructured.NestedString(e.Object, "note")
		if kind != "Profile" || about != name || typ != "Warning" ||
			!strings.Contains(note, "profile/"+name+": ") || !strings.Contains(note, "spec.egress.rules[0].cidrs[0]") {
			t.Errorf("the Event %s: %s about %s %s, note %q; want a Warning about Profile %s naming the object and the field",
				e.GetName(), typ, kind, about, note, name)
		}
	}

	t.Run("never_loaded", func(t *testing.T) {
		applyObject(t, client, refused("fleet-never"))
		toldOn(t, "fleet-never", uid(t, "fleet-never"), "Invalid")
		if o := profiles.latest("fleet-never"); o != nil {
			t.Errorf("a Profile that never loaded is declared: %v", o)
		}
	})
	t.Run("loaded_then_failed", func(t *testing.T) {
		applyObject(t, client, kubeProfile("fleet-broken", "ci", 300))
		profiles.until(t, "fleet-broken", "ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })
		applyObject(t, client, refused("fleet-broken"))
		toldOn(t, "fleet-broken", uid(t, "fleet-broken"), "LoadFailed")
		o := profiles.until(t, "fleet-broken", "invalid", func(o map[string]any) bool { return conditionIs(o, "Invalid", "True") })
		if field(o, "spec", "egress") != nil || !conditionIs(o, "Ready", "True") {
			t.Errorf("the refused version took effect: %v", o)
		}
	})
}

// Two marshald on one machine, each its own host: each reports its own
// Host's status (its capacity, its backend) and renews its own Lease, and
// neither's writes conflict with the other's.
func TestKubernetesTwoHostsKeepTheirOwnStatusAndLease(t *testing.T) {
	server, client := kubeAPI(t)
	hosts := []struct {
		name string
		cpu  int64
	}{{"host-1", 1000}, {"host-2", 3000}}
	for _, h := range hosts {
		applyObject(t, client, kubeHost(h.name, int(h.cpu)))
		t.Cleanup(func() { deleteObject(t, client, hostsGVR, h.name) })
		d := newDaemon(t)
		d.startKube(server, h.name)
		t.Cleanup(func() {
			if strings.Contains(d.log.String(), "writing the Host's status") {
				t.Errorf("%s failed to write its status:\n%s", h.name, d.log.String())
			}
		})
	}
	for _, h := range hosts {
		o := waitAPI(t, client, hostsGVR, "", h.name, "its own status", apiDeadline, func(u *unstructured.Unstructured) bool {
			cpu, _, _ := unstructured.NestedInt64(u.Object, "status", "capacity", "cpu_milli")
			backend, _, _ := unstructured.NestedString(u.Object, "status", "backend")
			return cpu == h.cpu && backend == "cgroupfs"
		})
		target, _, _ := unstructured.NestedInt64(o.Object, "status", "admission", "capacity", "cpu_milli")
		if target == 0 {
			t.Errorf("%s: no admission capacity in its status: %v", h.name, o.Object["status"])
		}
		for _, mf := range o.GetManagedFields() {
			if mf.Subresource == "status" && mf.Manager != "marshald/"+h.name {
				t.Errorf("%s: its status has fields of %s too", h.name, mf.Manager)
			}
		}
		first := waitAPI(t, client, leasesGVR, "marshal-system", h.name, "held", apiDeadline, func(u *unstructured.Unstructured) bool {
			holder, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
			return holder == h.name
		})
		renewed, _, _ := unstructured.NestedString(first.Object, "spec", "renewTime")
		waitAPI(t, client, leasesGVR, "marshal-system", h.name, "renewed", apiDeadline, func(u *unstructured.Unstructured) bool {
			again, _, _ := unstructured.NestedString(u.Object, "spec", "renewTime")
			holder, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
			return holder == h.name && again != renewed
		})
	}
	// The Host's Ready condition shows in kubectl get hosts: the printer
	// column's path finds it.
	o, err := client.Resource(hostsGVR).Get(t.Context(), "host-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	ready := false
	for _, c := range conds {
		m, _ := c.(map[string]any)
		ready = ready || m["type"] == "Ready" && m["status"] == "True"
	}
	if !ready {
		t.Errorf("host-1 is not Ready: %v", conds)
	}
	// A Profile that marshal refuses, and that never loaded, is told by
	// each host that took it, in an Event of its own about the Profile:
	// the host is its reporting instance and in its name.
	deleteObject(t, client, profilesGVR, "fleet-refused")
	t.Cleanup(func() { deleteObject(t, client, profilesGVR, "fleet-refused") })
	applyObject(t, client, `apiVersion: marshal.dev/v1alpha1
kind: Profile
metadata: {name: fleet-refused}
spec:
  egress: {default: deny, rules: [{action: allow, cidrs: ["10.20.0.1/16"]}]}
`)
	refused, err := client.Resource(profilesGVR).Get(t.Context(), "fleet-refused", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reported := waitEvents(t, client, "an Event about fleet-refused from each host", func(e *unstructured.Unstructured) bool {
		note, _, _ := unstructured.NestedString(e.Object, "note")
		reason, _, _ := unstructured.NestedString(e.Object, "reason")
		return reason == "Invalid" && strings.Contains(note, "profile/fleet-refused: ")
	}, func(seen map[string]*unstructured.Unstructured) bool {
		return seen["host-1"] != nil && seen["host-2"] != nil
	})
	for inst, e := range reported {
		ctl, _, _ := unstructured.NestedString(e.Object, "reportingController")
		typ, _, _ := unstructured.NestedString(e.Object, "type")
		kind, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
		about, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
		uid, _, _ := unstructured.NestedString(e.Object, "regarding", "uid")
		if ctl != "marshal.dev/marshald" || typ != "Warning" || kind != "Profile" || about != "fleet-refused" || uid != string(refused.GetUID()) ||
			!strings.Contains(e.GetName(), "."+inst+".") {
			t.Errorf("the Event %s reported by %s: controller %q, type %q, about %s %s (uid %s)", e.GetName(), inst, ctl, typ, kind, about, uid)
		}
	}
}

// The API server stopped: agents and state are untouched, marshalctl
// still answers, and a restart of marshald during the outage declares the
// last good objects again. Started again: the next edit applies.
func TestKubernetesOutageChangesNothing(t *testing.T) {
	server, client := kubeAPI(t)
	deleteObject(t, client, profilesGVR, "fleet-outage")
	t.Cleanup(func() { deleteObject(t, client, profilesGVR, "fleet-outage") })
	d := newDaemon(t)
	d.startKube(server, "host-3")
	applyObject(t, client, kubeProfile("fleet-outage", "ci", 400))
	profiles := d.watch("profiles")
	profiles.until(t, "fleet-outage", "ready", func(o map[string]any) bool {
		return conditionIs(o, "Ready", "True") && appliedCPU(o) == 400
	})

	name, dir, agent := d.startAgent("fleet-outage")
	d.watch("agents").until(t, name, "seen", func(o map[string]any) bool { return field(o, "status", "populated") == true })

	server.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			if err := server.StartAPIServer(); err != nil {
				t.Errorf("starting the API server again: %v", err)
			}
		}
	}()
	events := d.watchLines("events", "-w")
	events.until(t, "the outage noticed", func(s string) bool { return strings.Contains(s, "APIUnreachable") })
	untouched := func(when string) {
		t.Helper()
		o := d.watch("profiles").until(t, "fleet-outage", "still declared "+when, func(o map[string]any) bool { return o != nil })
		if appliedCPU(o) != 400 || !conditionIs(o, "Ready", "True") {
			t.Errorf("%s: fleet-outage = %v, want it as it was", when, o)
		}
		if err := agent.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("%s: the agent died: %v", when, err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s: the agent's scope is gone: %v", when, err)
		}
	}
	untouched("during the outage")

	d.stop()
	d.startKube(server, "host-3")
	untouched("after a restart during the outage")

	// Started during the outage, marshald could not ask whose its
	// credential is: it asks when the API answers, and only then writes.
	testutil.Eventually(t, d.log.wake, func() bool {
		return strings.Contains(d.log.String(), "the API cannot say who this host's credential is yet")
	}, "marshald to say it waits to verify its credential")
	back := time.Now()
	if err := server.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitAPI(t, client, leasesGVR, "marshal-system", "host-3", "renewed after the outage", time.Minute, func(u *unstructured.Unstructured) bool {
		renewed, _, _ := unstructured.NestedString(u.Object, "spec", "renewTime")
		at, err := time.Parse(time.RFC3339Nano, renewed)
		return err == nil && at.After(back)
	})
	applyObject(t, client, kubeProfile("fleet-outage", "ci", 600))
	// The reflectors retry with a backoff of up to 10 s: the bound is
	// wider than a test's usual one.
	w := d.watch("profiles")
	deadline := time.Now().Add(time.Minute)
	for {
		o := w.latest("fleet-outage")
		if appliedCPU(o) == 600 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edit after the outage did not apply within a minute: %v", o)
		}
		select {
		case <-w.wake:
		case <-time.After(time.Until(deadline)):
		}
	}
	if err := agent.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the agent died: %v", err)
	}
}
