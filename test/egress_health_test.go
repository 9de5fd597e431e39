//go:build linux

package test

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	marshald "github.com/marshal-dev/marshal/internal/daemon"
	"github.com/marshal-dev/marshal/internal/testutil"
)

// TestEgressAddressTakenIsShown runs marshald where its default egress
// address is held by a listener of the test's (in a network namespace
// of the test's own, so that no fixed port of the machine is taken), as
// when another marshald runs: the Host's EgressProxy condition, the
// Profile that declares egress, doctor and a refused launch each say
// that the proxy is not listening, where and why, and name the flag.
func TestEgressAddressTakenIsShown(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetworkNamespace(t)
	addr := marshald.DefaultEgressAddress(os.Geteuid())
	var squatter net.Listener
	if err := ns.do(func() (err error) { squatter, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()

	d := newDaemon(t)
	d.write("all.yaml", launchManifests(t.TempDir(), "", launchWorkspace{name: "web", participation: "none"})+
		"---\napiVersion: marshal.dev/v1alpha1\nkind: Profile\nmetadata: {name: fetcher}\nspec:\n  egress: {default: deny}\n"+
		"---\napiVersion: marshal.dev/v1alpha1\nkind: Workspace\nmetadata: {name: net}\nspec: {root: "+t.TempDir()+", profile: fetcher}\n")
	d.egressDefault, d.spawn = true, ns.do
	d.start()
	d.waitReady("web", "net")

	wantSays := func(what, got string) {
		t.Helper()
		for _, want := range []string{addr, "address already in use", "--egress-address"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s = %q, want it to name %q", what, got, want)
			}
		}
	}
	host := d.watch("hosts").until(t, "local", "EgressProxy False", func(o map[string]any) bool { return conditionIs(o, "EgressProxy", "False") })
	if c := condition(host, "EgressProxy"); c["reason"] != "EgressAddressInUse" {
		t.Errorf("host condition EgressProxy reason %v, want EgressAddressInUse", c["reason"])
	} else {
		wantSays("the host's EgressProxy message", c["message"].(string))
	}
	profiles := d.watch("profiles")
	prof := profiles.until(t, "fetcher", "not Ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "False") })
	if c := condition(prof, "Ready"); c["reason"] != "EgressAddressInUse" {
		t.Errorf("profile fetcher Ready reason %v, want EgressAddressInUse", c["reason"])
	} else {
		wantSays("profile fetcher's Ready message", c["message"].(string))
	}
	// A profile without egress is not hindered.
	profiles.until(t, "coder", "Ready", func(o map[string]any) bool { return conditionIs(o, "Ready", "True") })

	doc := d.ctl("doctor")
	if doc.code == 0 {
		t.Errorf("doctor exits 0 with the egress address taken:\n%s", doc.stdout)
	}
	// The check's line and the fix under it.
	_, check, _ := strings.Cut(doc.stdout, "✘ egress proxy:")
	lines := strings.SplitAfterN(check, "\n", 3)
	wantSays("doctor's egress proxy check", strings.Join(lines[:min(2, len(lines))], ""))

	r := d.runNow("-w", "net", "--", "true")
	if r.code != 69 || !strings.HasPrefix(r.stderr, "EGRESS_UNAVAILABLE: ") || !strings.Contains(r.stderr, "nothing was started") {
		t.Errorf("run under a profile with egress: exit %d\n%s\nwant 69 and EGRESS_UNAVAILABLE, nothing started", r.code, r.stderr)
	}
	wantSays("the refusal", r.stderr)
	if r := d.runNow("-w", "web", "--", "true"); r.code != 0 {
		t.Errorf("run under a profile without egress: exit %d\n%s", r.code, r.stderr)
	}
}

// threadNamespace is a namespace of the test's own, held by one locked
// thread: what do runs there, a socket it makes and a process it starts,
// is in the namespace.
type threadNamespace struct {
	calls chan func()
}

// newNetworkNamespace makes a network namespace of the test's own.
func newNetworkNamespace(t *testing.T) *threadNamespace {
	t.Helper()
	return newThreadNamespace(t, "a network namespace", func() error { return unix.Unshare(unix.CLONE_NEWNET) })
}

// newThreadNamespace makes what enter makes on a thread of its own, and
// skips the test, naming what, where it fails.
func newThreadNamespace(t *testing.T, what string, enter func() error) *threadNamespace {
	t.Helper()
	ns := &threadNamespace{calls: make(chan func())}
	made := make(chan error)
	done := make(chan struct{})
	testutil.GoOffMainThread(func() {
		defer close(done)
		// Never unlocked: the thread, in the namespace, ends with this
		// goroutine.
		if err := enter(); err != nil {
			made <- err
			return
		}
		made <- nil
		for f := range ns.calls {
			f()
		}
	})
	if err := <-made; err != nil {
		t.Skipf("cannot make %s: %v", what, err)
	}
	t.Cleanup(func() {
		close(ns.calls)
		<-done
	})
	return ns
}

// do runs f on the namespace's thread.
func (ns *threadNamespace) do(f func() error) error {
	errc := make(chan error, 1)
	ns.calls <- func() { errc <- f() }
	return <-errc
}
