//go:build linux

package test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// With the systemd backend, on a throwaway user manager, the agent runs in
// a transient scope of the manager; systemd removes the scope itself once
// the agent exits, and the launch's slot is freed all the same.
func TestRunWithTheSystemdBackend(t *testing.T) {
	m := userManager(t)
	// marshald in system mode talks to the manager as if it were the
	// system's.
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(m.RuntimeDir, "bus"))
	root := t.TempDir()
	d := newDaemon(t)
	d.write("all.yaml", launchManifests(root, roomy, launchWorkspace{name: "web", participation: "none", maxLive: 1}))
	d.start("--backend", "systemd")
	d.waitReady("web")
	for i := range 2 { // max_live 1: the second runs once the first's slot is back
		r := d.runNow("-w", "web", "--", "sh", "-c", "marshalctl identify; cat /proc/self/cgroup; exit 5")
		if r.code != 5 {
			t.Fatalf("run %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
		}
		scope := regexp.MustCompile(`scope (marshal-coder-[0-9a-f]{32}\.scope)`).FindStringSubmatch(r.stdout)
		if scope == nil || !regexp.MustCompile(`(?m)^0::`+regexp.QuoteMeta(m.Cgroup)+`/marshal\.slice/marshal-coder\.slice/`+regexp.QuoteMeta(scope[1])+`$`).MatchString(r.stdout) {
			t.Fatalf("run %d is not in a scope of the manager:\n%s", i, r.stdout)
		}
		d.waitSettled(t)
	}
}

// A user manager holds no controller on this host, so its plan gives CPU
// at the cooperative level only: scheduling priority. An attempt that
// asks for that much runs admitted, at nice CooperativeNice, confirmed by
// reading its priority back; one that asks for kernel CPU is refused.
func TestCooperativeCPUWithTheSystemdBackend(t *testing.T) {
	m := userManager(t)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(m.RuntimeDir, "bus"))
	root := t.TempDir()
	d := newDaemon(t)
	d.write("all.yaml", launchManifests(root, roomy,
		launchWorkspace{name: "nice", participation: "required",
			request: "      minimum: {cpu: cooperative}\n"},
		launchWorkspace{name: "firm", participation: "required",
			request: "      minimum: {cpu: kernel}\n"},
	))
	d.start("--backend", "systemd")
	d.waitReady("nice", "firm")

	r := d.runNow("-w", "nice", "--", "sh", "-c", "cut -d' ' -f19 /proc/self/stat")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "10" {
		t.Fatalf("cooperative run: exit %d, nice %q, want 0 and 10\n%s", r.code, r.stdout, r.stderr)
	}
	d.waitSettled(t)
	r = d.runNow("-w", "firm", "--", "true")
	if r.code != 78 || !strings.Contains(r.stderr, "RESOURCE_POLICY_UNSUPPORTED") {
		t.Fatalf("kernel CPU on a manager without controllers: exit %d\n%s", r.code, r.stderr)
	}
}
